/// The best `capacity` rows of a stream, in one pass and without sorting the stream: the same
/// rows, in the same order, as `RankFusion.sorted(all).prefix(capacity)` (higher score first,
/// ties by id), because that order is total when ids are unique. A dense scan offers every row
/// of the index, so this keeps its cost linear in the rows plus a little per replacement.
struct TopSelection {
    let capacity: Int
    private(set) var rows: [ScoredRow] = []
    /// Index in `rows` of the row that would be dropped next (valid once `rows` is full).
    private var worst = 0

    init(capacity: Int) {
        self.capacity = max(0, capacity)
        rows.reserveCapacity(self.capacity)
    }

    /// Whether a row with `score` could enter the list (cheap test before building the row).
    func admits(_ score: Double) -> Bool {
        rows.count < capacity || (capacity > 0 && score >= rows[worst].score)
    }

    mutating func offer(_ row: ScoredRow) {
        guard capacity > 0 else { return }
        if rows.count < capacity {
            rows.append(row)
            if rows.count == capacity { findWorst() }
        } else if RankFusion.precedes((row.score, row.id), (rows[worst].score, rows[worst].id)) {
            rows[worst] = row
            findWorst()
        }
    }

    /// The kept rows, best first.
    var sorted: [ScoredRow] { RankFusion.sorted(rows) }

    private mutating func findWorst() {
        worst = rows.indices.dropFirst().reduce(0) { current, index in
            RankFusion.precedes((rows[current].score, rows[current].id), (rows[index].score, rows[index].id)) ? index : current
        }
    }
}
