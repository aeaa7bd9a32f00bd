import CairnCore
import CairnIndex
import Foundation

/// The results of one evaluation: per query and mode, and their means per mode.
struct EvalReport {
    struct PerQuery: Encodable {
        var query: String
        var mode: String
        var metrics: QueryMetrics
        var fusion: String
        var top10: [String]

        enum CodingKeys: String, CodingKey { case query = "query_id", mode, fusion, top10 = "top10" }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(query, forKey: .query)
            try c.encode(mode, forKey: .mode)
            try metrics.encode(to: encoder)
            try c.encode(fusion, forKey: .fusion)
            try c.encode(top10, forKey: .top10)
        }
    }

    struct ModeRow: Encodable {
        var mode: String
        var queries: Int
        var metrics: QueryMetrics
        /// Queries this mode answered with lexical alone because the dense scores were degenerate.
        var lexicalFallbacks: Int
        /// Queries whose first 10 answers at k = 10 differ from the first 10 at k = 100 (nil: not compared).
        var differAtK10: Int?

        enum CodingKeys: String, CodingKey {
            case mode, queries, lexicalFallbacks = "lexical_fallbacks", differAtK10 = "top10_differs_at_k10"
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(mode, forKey: .mode)
            try c.encode(queries, forKey: .queries)
            try metrics.encode(to: encoder)
            try c.encode(lexicalFallbacks, forKey: .lexicalFallbacks)
            try c.encodeIfPresent(differAtK10, forKey: .differAtK10)
        }
    }

    var collection: String
    var documents: Int
    var perQuery: [PerQuery]
    var rows: [ModeRow]

    init(collection: String, documents: Int, modes: [SearchRequest.Mode], queries: [TestCollection.Query],
         judgments: [String: [String: Int]], outcomes: [QueryRunner.Outcome]) {
        self.collection = collection
        self.documents = documents
        var perQuery: [PerQuery] = []
        var rows: [ModeRow] = []
        for (modeIndex, mode) in modes.enumerated() {
            var scores: [QueryMetrics] = []
            var fallbacks = 0
            for (queryIndex, query) in queries.enumerated() {
                let outcome = outcomes[modeIndex * queries.count + queryIndex]
                let metrics = QueryMetrics(ranking: outcome.ranking, grades: judgments[query.id] ?? [:])
                scores.append(metrics)
                if outcome.fusion == SearchResponse.Fusion.lexicalFallback.rawValue { fallbacks += 1 }
                perQuery.append(PerQuery(query: query.id, mode: mode.rawValue, metrics: metrics, fusion: outcome.fusion,
                                         top10: Array(outcome.ranking.prefix(10))))
            }
            let mean = MetricAverages(scores)
            rows.append(ModeRow(mode: mode.rawValue, queries: mean.queries, metrics: mean.means, lexicalFallbacks: fallbacks))
        }
        self.perQuery = perQuery
        self.rows = rows
    }

    /// Counts, per mode, the queries whose answers to requests with k = 10 (`atK10`) are not the
    /// first 10 of `deep` (the report's own, k = 100). Both in the order of the jobs.
    mutating func compare(atK10 shallow: [QueryRunner.Outcome], with deep: [QueryRunner.Outcome], queries: Int) {
        for modeIndex in rows.indices {
            let range = modeIndex * queries..<(modeIndex + 1) * queries
            rows[modeIndex].differAtK10 = range.filter { shallow[$0].ranking != Array(deep[$0].ranking.prefix(10)) }.count
        }
    }

    /// A Markdown table, modes as rows, metrics (in percent) as columns.
    var table: String {
        var lines = ["\(collection): \(documents) documents, \(rows.first?.queries ?? 0) judged queries",
                     "", "| mode | nDCG@10 | Recall@10 | Recall@100 | MRR@10 |", "|---|---:|---:|---:|---:|"]
        for row in rows {
            let m = row.metrics
            lines.append(String(format: "| %@ | %.2f | %.2f | %.2f | %.2f |", row.mode, 100 * m.ndcg10, 100 * m.recall10,
                                100 * m.recall100, 100 * m.reciprocalRank10))
        }
        let compared = rows.compactMap { row in row.differAtK10.map { "\(row.mode) \($0)" } }
        if !compared.isEmpty {
            lines.append("")
            lines.append("queries whose first 10 answers differ between k = 10 and k = 100: " + compared.joined(separator: ", "))
        }
        for row in rows where row.lexicalFallbacks > 0 {
            lines.append("")
            lines.append("\(row.mode): \(row.lexicalFallbacks) queries fell back to lexical (degenerate dense scores)")
        }
        return lines.joined(separator: "\n")
    }

    /// `{collection, documents, modes: [{mode, queries, ndcg@10, recall@10, recall@100, mrr@10, lexical_fallbacks}]}`,
    /// metrics as fractions.
    func json() throws -> String {
        struct Body: Encodable { var collection: String; var documents: Int; var modes: [ModeRow] }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return String(decoding: try encoder.encode(Body(collection: collection, documents: documents, modes: rows)), as: UTF8.self)
    }

    /// One JSON object per line: query_id, mode, the four metrics, fusion, top10 ids.
    func writePerQuery(to path: String) throws(EvalFailure) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var bytes = Data()
        for entry in perQuery {
            guard let line = try? encoder.encode(entry) else { throw .io("cannot encode the per-query results") }
            bytes += line
            bytes.append(UInt8(ascii: "\n"))
        }
        guard FileManager.default.createFile(atPath: path, contents: bytes) else { throw .io("cannot write \(path)") }
    }
}
