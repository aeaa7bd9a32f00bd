/// A candidate in one ranked list: the row of the index matrix, its chunk id and its score.
struct ScoredRow: Hashable, Sendable {
    var row: Int
    var id: String
    var score: Double
}

/// A candidate after fusion, with the raw scores it came with.
struct FusedRow: Hashable, Sendable {
    var row: Int
    var id: String
    var lexical: Double?
    var dense: Double?
    var fused: Double
}

/// The mean and standard deviation of one query's scores over a set of rows, from running sums.
struct ScoreMoments: Hashable, Sendable {
    private(set) var count = 0
    private(set) var sum = 0.0
    private(set) var sumOfSquares = 0.0

    init() {}

    /// `scores`, then `zeros` rows that score 0.
    init(scores: [Double], zeros: Int = 0) {
        for score in scores { add(score) }
        addZeros(zeros)
    }

    /// The rows of `scores` that `mask` lets through (every row when nil), in one tight pass, run
    /// only by the fusion that needs it (hybrid), so a dense query does not pay for it.
    init(scores: [Float], mask: [Bool]?) {
        var (count, sum, squares) = (0, 0.0, 0.0)
        scores.withUnsafeBufferPointer { buffer in
            if let mask {
                for row in buffer.indices where mask[row] {
                    let score = Double(buffer[row])
                    (count, sum, squares) = (count + 1, sum + score, squares + score * score)
                }
            } else {
                for value in buffer {
                    let score = Double(value)
                    sum += score
                    squares += score * score
                }
                count = buffer.count
            }
        }
        (self.count, self.sum, self.sumOfSquares) = (count, sum, squares)
    }

    mutating func add(_ score: Double) {
        count += 1
        sum += score
        sumOfSquares += score * score
    }

    /// Adds another set of rows' sums.
    mutating func add(count rows: Int, sum: Double, squares: Double) {
        count += rows
        self.sum += sum
        sumOfSquares += squares
    }

    mutating func add(_ other: ScoreMoments) { add(count: other.count, sum: other.sum, squares: other.sumOfSquares) }

    /// The moments of `total` rows estimated from those of a sample of them: the sample's mean
    /// and mean square, `total` times.
    init(sample: ScoreMoments, of total: Int) {
        let scale = sample.count > 0 ? Double(total) / Double(sample.count) : 0
        (count, sum, sumOfSquares) = (sample.count > 0 ? total : 0, sample.sum * scale, sample.sumOfSquares * scale)
    }

    /// `rows` more rows that score 0 (they move the mean and the spread, not the sums).
    mutating func addZeros(_ rows: Int) {
        count += max(0, rows)
    }

    var mean: Double { count > 0 ? sum / Double(count) : 0 }

    /// The sums as a public value's fields: (count, sum, sum of squares).
    var sums: (count: Int, sum: Double, squares: Double) { (count, sum, sumOfSquares) }

    /// The population standard deviation (0 for fewer than two rows or no spread).
    var standardDeviation: Double {
        guard count > 1 else { return 0 }
        return max(0, sumOfSquares / Double(count) - mean * mean).squareRoot()
    }

    /// How many standard deviations `score` lies above the mean; 0 when the scores do not spread.
    func standardized(_ score: Double) -> Double {
        let deviation = standardDeviation
        return deviation > 0 ? (score - mean) / deviation : 0
    }
}

/// The pure arithmetic of ranking: ordering, standardisation, weighted and reciprocal-rank fusion.
enum RankFusion {
    /// Higher score first; equal scores by chunk id (UTF-8 bytes), so ties are deterministic.
    static func precedes(_ a: (score: Double, id: String), _ b: (score: Double, id: String)) -> Bool {
        if a.score != b.score { return a.score > b.score }
        return a.id.utf8.lexicographicallyPrecedes(b.id.utf8)
    }

    static func sorted(_ list: [ScoredRow]) -> [ScoredRow] {
        list.sorted { precedes(($0.score, $0.id), ($1.score, $1.id)) }
    }

    static func sorted(_ list: [FusedRow]) -> [FusedRow] {
        list.sorted { precedes(($0.fused, $0.id), ($1.fused, $1.id)) }
    }

    /// Hybrid fusion: each candidate's lexical and dense scores, standardised against their
    /// distribution over every row the query could return (`ScoreMoments`), then weighted:
    /// `lexicalWeight` × z(lexical) + `denseWeight` × z(dense). The candidates are the union of
    /// both lists; a candidate that the lexical list does not hold scores 0 there (it did not
    /// match, or fell below the list's depth), and `denseScore(row)` gives every candidate's
    /// cosine, listed or not. Because the moments cover every row, not the lists, the scores do
    /// not depend on how long the lists are, nor on k. Sorted best first.
    static func standardized(lexical: [ScoredRow], lexicalMoments: ScoreMoments,
                             dense: [ScoredRow], denseMoments: ScoreMoments, denseScore: (Int) -> Double,
                             lexicalWeight: Double, denseWeight: Double) -> [FusedRow] {
        let lexicalScore = Dictionary(uniqueKeysWithValues: lexical.map { ($0.row, $0.score) })
        var candidates: [Int: String] = [:]
        for entry in lexical + dense { candidates[entry.row] = entry.id }
        return sorted(candidates.map { row, id in
            let (matched, cosine) = (lexicalScore[row], denseScore(row))
            return FusedRow(row: row, id: id, lexical: matched, dense: cosine,
                            fused: lexicalWeight * lexicalMoments.standardized(matched ?? 0)
                                + denseWeight * denseMoments.standardized(cosine))
        })
    }

    /// Σ 1 / (constant + rank) over both lists, rank 1-based within each (sorted) list.
    static func reciprocalRank(lexical: [ScoredRow], dense: [ScoredRow], constant: Double) -> [FusedRow] {
        var fused: [Int: FusedRow] = [:]
        for (index, entry) in dense.enumerated() {
            fused[entry.row] = FusedRow(row: entry.row, id: entry.id, lexical: nil, dense: entry.score,
                                        fused: 1 / (constant + Double(index + 1)))
        }
        for (index, entry) in lexical.enumerated() {
            fused[entry.row, default: FusedRow(row: entry.row, id: entry.id, lexical: nil, dense: nil, fused: 0)]
                .lexical = entry.score
            fused[entry.row]!.fused += 1 / (constant + Double(index + 1))
        }
        return sorted(Array(fused.values))
    }

    /// A single list as the ranking, its own scores as the fused score.
    static func single(_ list: [ScoredRow], isDense: Bool) -> [FusedRow] {
        list.map { FusedRow(row: $0.row, id: $0.id, lexical: isDense ? nil : $0.score,
                            dense: isDense ? $0.score : nil, fused: $0.score) }
    }

    /// Whether the best `window` scores are all above `minimum` and within `maximumSpread`.
    static func isDegenerate(topScores: [Float], minimum: Float, maximumSpread: Float) -> Bool {
        guard topScores.count >= 2, let low = topScores.min(), let high = topScores.max() else { return false }
        return low > minimum && high - low < maximumSpread
    }
}
