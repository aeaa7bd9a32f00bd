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

/// The pure arithmetic of ranking: ordering, normalisation, weighted and reciprocal-rank fusion.
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

    /// Min–max normalisation to [0, 1]; a list of one, or with no spread, normalises to 1.
    static func minMaxNormalized(_ scores: [Double]) -> [Double] {
        guard let low = scores.min(), let high = scores.max() else { return [] }
        let spread = high - low
        guard spread > 0 else { return scores.map { _ in 1 } }
        return scores.map { ($0 - low) / spread }
    }

    /// The union of both lists, each normalised on its own; a candidate missing from a list
    /// contributes 0 for it. Sorted best first.
    static func weighted(lexical: [ScoredRow], dense: [ScoredRow], lexicalWeight: Double, denseWeight: Double) -> [FusedRow] {
        var fused: [Int: FusedRow] = [:]
        for (entry, normalized) in zip(dense, minMaxNormalized(dense.map(\.score))) {
            fused[entry.row] = FusedRow(row: entry.row, id: entry.id, lexical: nil, dense: entry.score,
                                        fused: denseWeight * normalized)
        }
        for (entry, normalized) in zip(lexical, minMaxNormalized(lexical.map(\.score))) {
            fused[entry.row, default: FusedRow(row: entry.row, id: entry.id, lexical: nil, dense: nil, fused: 0)]
                .lexical = entry.score
            fused[entry.row]!.fused += lexicalWeight * normalized
        }
        return sorted(Array(fused.values))
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
