import Foundation

/// The queries and relevance judgments of a BEIR-format test collection, parsed from bytes
/// (reading the files is the caller's job):
/// - `queries.jsonl`: one JSON object per line with string `_id` and `text` (other keys, e.g.
///   `metadata`, are ignored);
/// - `qrels/<split>.tsv`: tab-separated `query-id corpus-id score` lines, an optional header
///   line starting with `query-id`, integer scores.
public struct TestCollection: Sendable, Hashable {
    public struct Query: Sendable, Hashable {
        public var id: String
        public var text: String

        public init(id: String, text: String) {
            self.id = id
            self.text = text
        }
    }

    /// In file order.
    public var queries: [Query]
    /// query id → (document id → grade).
    public var judgments: [String: [String: Int]]

    public init(queries: [Query], judgments: [String: [String: Int]]) {
        self.queries = queries
        self.judgments = judgments
    }

    /// The queries that have at least one relevant (grade > 0) judgment: the ones evaluated.
    public var judgedQueries: [Query] {
        queries.filter { (judgments[$0.id] ?? [:]).values.contains { $0 > 0 } }
    }

    /// Parses `queries.jsonl` and a qrels TSV.
    /// - Throws: `CoreError` `.invalidArgument` naming the file and line (never its text).
    public static func parse(queriesJSONL: [UInt8], qrelsTSV: [UInt8]) throws(CoreError) -> TestCollection {
        TestCollection(queries: try parseQueries(queriesJSONL), judgments: try parseJudgments(qrelsTSV))
    }

    private struct QueryLine: Decodable {
        var _id: String
        var text: String
    }

    static func parseQueries(_ bytes: [UInt8]) throws(CoreError) -> [Query] {
        var queries: [Query] = []
        var seen: Set<String> = []
        for (index, line) in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            guard let decoded = try? JSONDecoder().decode(QueryLine.self, from: Data(line)) else {
                throw CoreError(.invalidArgument, "queries.jsonl line \(index + 1): not a JSON object with string `_id` and `text`")
            }
            guard seen.insert(decoded._id).inserted else {
                throw CoreError(.invalidArgument, "queries.jsonl line \(index + 1): duplicate `_id`")
            }
            queries.append(Query(id: decoded._id, text: decoded.text))
        }
        return queries
    }

    static func parseJudgments(_ bytes: [UInt8]) throws(CoreError) -> [String: [String: Int]] {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw CoreError(.invalidArgument, "the qrels file is not UTF-8")
        }
        var judgments: [String: [String: Int]] = [:]
        // Split on Characters that are newlines: "\r\n" is one Character, so CRLF files work.
        for (index, line) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            if line.allSatisfy(\.isWhitespace) { continue }
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            if index == 0 && fields.first == "query-id" { continue }
            guard fields.count == 3, !fields[0].isEmpty, !fields[1].isEmpty, let grade = Int(fields[2]) else {
                throw CoreError(.invalidArgument, "qrels line \(index + 1): expected query-id<TAB>corpus-id<TAB>integer score")
            }
            judgments[String(fields[0]), default: [:]][String(fields[1])] = grade
        }
        return judgments
    }
}
