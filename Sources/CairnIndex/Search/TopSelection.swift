/// The best `capacity` rows of a stream, in one pass and without sorting the stream: the same
/// rows, in the same order, as `RankFusion.sorted(all).prefix(capacity)` (higher score first,
/// ties by id), because that order is total when ids are unique. The kept rows are a binary heap
/// with the row to drop next at its root, so a replacement costs log(capacity) comparisons, not
/// capacity (a replicated corpus ties thousands of rows on one score, each tie an id comparison).
struct TopSelection {
    let capacity: Int
    private(set) var rows: [ScoredRow] = []

    init(capacity: Int) {
        self.capacity = max(0, capacity)
        rows.reserveCapacity(self.capacity)
    }

    /// Whether a row with `score` could enter the list (cheap test before building the row).
    func admits(_ score: Double) -> Bool {
        rows.count < capacity || (capacity > 0 && score >= rows[0].score)
    }

    mutating func offer(_ row: ScoredRow) {
        guard capacity > 0 else { return }
        if rows.count < capacity {
            rows.append(row)
            siftUp(rows.count - 1)
        } else if Self.ranksBefore(row, rows[0]) {
            rows[0] = row
            siftDown(0)
        }
    }

    /// The kept rows, best first.
    var sorted: [ScoredRow] { RankFusion.sorted(rows) }

    /// Whether `a` ranks before `b` (`RankFusion.precedes`): the heap keeps the row that ranks
    /// last at its root.
    private static func ranksBefore(_ a: ScoredRow, _ b: ScoredRow) -> Bool {
        RankFusion.precedes((a.score, a.id), (b.score, b.id))
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.ranksBefore(rows[parent], rows[child]) else { return }
            rows.swapAt(parent, child)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1, right = left + 1
            var worst = parent
            if left < rows.count, Self.ranksBefore(rows[worst], rows[left]) { worst = left }
            if right < rows.count, Self.ranksBefore(rows[worst], rows[right]) { worst = right }
            guard worst != parent else { return }
            rows.swapAt(parent, worst)
            parent = worst
        }
    }
}
