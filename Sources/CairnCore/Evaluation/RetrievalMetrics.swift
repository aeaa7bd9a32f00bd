import Foundation

/// The retrieval metrics of `cairn eval`, as trec_eval computes them (`ndcg_cut`, `recall`,
/// `recip_rank` cut at 10), pure functions of one ranking and one query's judgments.
///
/// - `ranking`: the retrieved document ids, best first. A repeated id counts only at its first
///   position (later copies are skipped, so they neither gain nor take a rank).
/// - `grades`: the query's judgments, document id → grade. A grade > 0 is relevant; 0 or less
///   (and any unjudged document) gains nothing.
///
/// Definitions, with rank i counted from 1:
/// - DCG@k = Σ_{i ≤ k} gain(i) / log2(i + 1), with linear gains: gain(i) = the grade of the
///   document at rank i when > 0, else 0.
/// - nDCG@k = DCG@k / IDCG@k, where IDCG@k is the DCG@k of the ideal ranking: every judged
///   grade > 0 of the query, sorted descending (not only the retrieved ones). 0 when IDCG is 0.
/// - Recall@k = (relevant documents in the top k) / (all relevant documents of the query);
///   0 when the query has none.
/// - RR@k = 1 / (rank of the first relevant document) when it is within the top k, else 0.
public enum RetrievalMetrics {
    /// nDCG@`cutoff` with linear gains.
    public static func ndcg(ranking: [String], grades: [String: Int], cutoff: Int) -> Double {
        let ideal = discountedGain(grades.values.filter { $0 > 0 }.sorted(by: >), cutoff: cutoff)
        guard ideal > 0 else { return 0 }
        return discountedGain(unique(ranking, cutoff: cutoff).map { max(0, grades[$0] ?? 0) }, cutoff: cutoff) / ideal
    }

    /// Recall@`cutoff`: the share of the relevant documents found in the top `cutoff`.
    public static func recall(ranking: [String], grades: [String: Int], cutoff: Int) -> Double {
        let relevant = grades.values.filter { $0 > 0 }.count
        guard relevant > 0 else { return 0 }
        let found = unique(ranking, cutoff: cutoff).filter { (grades[$0] ?? 0) > 0 }.count
        return Double(found) / Double(relevant)
    }

    /// Reciprocal rank of the first relevant document within the top `cutoff`, else 0.
    public static func reciprocalRank(ranking: [String], grades: [String: Int], cutoff: Int) -> Double {
        guard let index = unique(ranking, cutoff: cutoff).firstIndex(where: { (grades[$0] ?? 0) > 0 }) else { return 0 }
        return 1 / Double(index + 1)
    }

    /// Σ gains[i] / log2(i + 2) over the first `cutoff` gains (i from 0).
    static func discountedGain(_ gains: [Int], cutoff: Int) -> Double {
        gains.prefix(max(0, cutoff)).enumerated().reduce(0) { sum, item in
            sum + Double(item.element) / log2(Double(item.offset + 2))
        }
    }

    /// The first `cutoff` distinct ids, in order.
    static func unique(_ ranking: [String], cutoff: Int) -> [String] {
        var seen: Set<String> = []
        var result: [String] = []
        for id in ranking where result.count < cutoff && seen.insert(id).inserted { result.append(id) }
        return result
    }
}

/// One query's scores at the cut-offs `cairn eval` reports.
public struct QueryMetrics: Sendable, Hashable, Codable {
    public var ndcg10: Double
    public var recall10: Double
    public var recall100: Double
    public var reciprocalRank10: Double

    public init(ndcg10: Double, recall10: Double, recall100: Double, reciprocalRank10: Double) {
        self.ndcg10 = ndcg10
        self.recall10 = recall10
        self.recall100 = recall100
        self.reciprocalRank10 = reciprocalRank10
    }

    /// The scores of `ranking` against one query's `grades`.
    public init(ranking: [String], grades: [String: Int]) {
        self.init(ndcg10: RetrievalMetrics.ndcg(ranking: ranking, grades: grades, cutoff: 10),
                  recall10: RetrievalMetrics.recall(ranking: ranking, grades: grades, cutoff: 10),
                  recall100: RetrievalMetrics.recall(ranking: ranking, grades: grades, cutoff: 100),
                  reciprocalRank10: RetrievalMetrics.reciprocalRank(ranking: ranking, grades: grades, cutoff: 10))
    }

    enum CodingKeys: String, CodingKey {
        case ndcg10 = "ndcg@10", recall10 = "recall@10", recall100 = "recall@100", reciprocalRank10 = "mrr@10"
    }
}

/// The mean of each metric over the evaluated queries: those with at least one relevant
/// judgment (a query without one is left out, as trec_eval leaves out queries absent from the
/// judgments). A query that retrieved nothing counts, with zeros (trec_eval's `-c`).
public struct MetricAverages: Sendable, Hashable, Codable {
    /// Queries averaged over.
    public var queries: Int
    public var means: QueryMetrics

    public init(_ scores: [QueryMetrics]) {
        queries = scores.count
        let n = Double(max(1, scores.count))
        means = QueryMetrics(ndcg10: scores.map(\.ndcg10).reduce(0, +) / n,
                             recall10: scores.map(\.recall10).reduce(0, +) / n,
                             recall100: scores.map(\.recall100).reduce(0, +) / n,
                             reciprocalRank10: scores.map(\.reciprocalRank10).reduce(0, +) / n)
    }
}
