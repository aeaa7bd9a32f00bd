import CairnTestSupport
import Foundation
import Testing

/// `cairn eval` end to end: a tiny BEIR collection is published, synced by the real cairnd from a
/// file:// source, served and queried over its socket; the lexical
/// metrics are checked against values computed by hand.
@Suite(.offCooperativePool) struct EvalTests {
    /// Six documents whose words do not overlap across the queries' keywords, so each query's
    /// lexical ranking is exactly one document (no ties, no partial matches).
    static let corpus = [
        #"{"_id": "d1", "title": "Boiling water", "text": "Boil water for one minute before drinking."}"#,
        #"{"_id": "d2", "title": "Flood maps", "text": "Flood maps show which streets are under water."}"#,
        #"{"_id": "d3", "title": "Storm shelter", "text": "Go to an interior room during a storm."}"#,
        #"{"_id": "d4", "title": "Generator safety", "text": "Run generators outdoors, far from windows."}"#,
        #"{"_id": "d5", "title": "Food storage", "text": "Keep food cold in a closed freezer."}"#,
        #"{"_id": "d6", "title": "Radio", "text": "A crank radio brings news when the power fails."}"#,
        #"{"_id": "d7", "title": "", "text": "   "}"#,  // empty text: left out of the publish
    ]
    static let queries = [
        #"{"_id": "q1", "text": "storm shelter"}"#,     // lexical: d3 only
        #"{"_id": "q2", "text": "generator outdoors"}"#,  // lexical: d4 only
        #"{"_id": "q3", "text": "crank radio news"}"#,    // lexical: d6 only
        #"{"_id": "q4", "text": "boiling water"}"#,       // no judgment: not evaluated
    ]
    static let qrels = "query-id\tcorpus-id\tscore\nq1\td3\t2\nq1\td4\t1\nq2\td4\t1\nq3\td5\t1\n"

    struct Report: Decodable {
        struct Row: Decodable {
            var mode: String
            var queries: Int
            var ndcg: Double
            var recall10: Double
            var recall100: Double
            var mrr: Double
            var differAtK10: Int
            enum CodingKeys: String, CodingKey {
                case mode, queries, ndcg = "ndcg@10", recall10 = "recall@10", recall100 = "recall@100", mrr = "mrr@10"
                case differAtK10 = "top10_differs_at_k10"
            }
        }
        var collection: String
        var documents: Int
        var modes: [Row]
    }

    /// The tiny collection and a tiny model in `workspace`: the collection's and the model's folders.
    private static func tinyCollection(in workspace: String) throws -> (collection: String, model: String) {
        let collection = workspace + "/tiny"
        try FileManager.default.createDirectory(atPath: collection + "/qrels", withIntermediateDirectories: true)
        try (corpus.joined(separator: "\n") + "\n").write(toFile: collection + "/corpus.jsonl", atomically: true, encoding: .utf8)
        try (queries.joined(separator: "\n") + "\n").write(toFile: collection + "/queries.jsonl", atomically: true, encoding: .utf8)
        try qrels.write(toFile: collection + "/qrels/test.tsv", atomically: true, encoding: .utf8)
        let model = workspace + "/model"
        try FileManager.default.createDirectory(atPath: model, withIntermediateDirectories: true)
        try TinyModel.write(to: model)
        return (collection, model)
    }

    /// Lexical rankings: q1 → [d3], q2 → [d4], q3 → [d6].
    /// q1 (d3: 2, d4: 1): DCG = 2/log2(2) = 2; IDCG = 2 + 1/log2(3) = 2.6309298 → nDCG 0.7601875;
    ///    recall 1/2 at 10 and 100; RR 1.
    /// q2 (d4: 1): nDCG 1, recall 1, RR 1.
    /// q3 (d5: 1; d6 unjudged): all 0.
    /// Means over 3: nDCG (0.7601875 + 1) / 3 = 0.5867292; recall (0.5 + 1) / 3 = 0.5; MRR 2/3.
    private static func expectHandComputedLexical(_ report: Report) throws -> Report.Row {
        let lexical = try #require(report.modes.first { $0.mode == "lexical" })
        #expect(abs(lexical.ndcg - 0.5867292) < 1e-6)
        #expect(abs(lexical.recall10 - 0.5) < 1e-9)
        #expect(abs(lexical.recall100 - 0.5) < 1e-9)
        #expect(abs(lexical.mrr - 2.0 / 3) < 1e-9)
        return lexical
    }

    @Test("Given a tiny BEIR collection, when cairn eval runs it through a real cairnd, then the lexical metrics equal the hand-computed values and every mode has a row")
    func tinyCollection() throws {
        let workspace = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: workspace) }
        let (collection, model) = try Self.tinyCollection(in: workspace)

        let perQuery = workspace + "/per-query.jsonl"
        let run = try Binaries.run("cairn", ["eval", collection, "--json", "--model-dir", model,
                                             "--no-cache", "--per-query", perQuery, "--sync-timeout", "120", "--keep"], in: workspace)
        #expect(run.status == 0, "cairn eval failed: \(run.error)")
        // --keep keeps cairnd's log (its reasons, when it fails) and its own configuration.
        let kept = try #require(run.error.split(separator: "\n").first { $0.hasPrefix("cairn eval: kept ") }?.dropFirst(17))
        defer { try? FileManager.default.removeItem(atPath: String(kept)) }
        let log = (try? String(contentsOfFile: kept + "/data/cairnd.log", encoding: .utf8)) ?? ""
        #expect(log.contains("answering queries"), "\(kept)/data/cairnd.log: \(log.prefix(300))")
        let report = try JSONDecoder().decode(Report.self, from: Data(run.output.utf8))
        #expect(report.collection == "tiny")
        #expect(report.documents == 6)
        #expect(report.modes.map(\.mode) == ["lexical", "dense", "hybrid", "rrf"])
        #expect(report.modes.allSatisfy { $0.queries == 3 })
        // Every query was sent again with k = 10 and the report counts, per mode, those whose
        // answers are not the k = 100 answer's first 10 (k-independence itself is tested on a
        // larger index in SearchIndexTests; here the count must be present and 0).
        #expect(report.modes.allSatisfy { $0.differAtK10 == 0 })

        let lexical = try Self.expectHandComputedLexical(report)
        // Fusion ranks the union of both lists, and 6 documents fit in k = 100: whatever the
        // random model says, nothing lexical finds can be missing from the top 100.
        for fused in report.modes where fused.mode == "hybrid" || fused.mode == "rrf" {
            #expect(fused.recall100 >= lexical.recall100)
        }

        let lines = try String(contentsOfFile: perQuery, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 12)
        let entries = try lines.map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:] }
        let q1 = try #require(entries.first { $0["query_id"] as? String == "q1" && $0["mode"] as? String == "lexical" })
        #expect(q1["top10"] as? [String] == ["d3"])
        #expect(run.error.contains("1 documents with empty text left out"))
    }

    // Which path each query took is not in cairnd's answer; LexicalPostingsTests and
    // PrunedLexicalTests check that each path gives the full search's list. Here: the setting
    // reaches cairnd's configuration, and the answers keep their metrics under it.
    @Test("Given a tiny BEIR collection, when cairn eval is given --lexical-postings-above and --approximate-dense-above never or 0, then cairnd's configuration carries them and the lexical metrics are still the hand-computed values",
          arguments: ["never", "0"])
    func lexicalPaths(setting: String) throws {
        let workspace = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: workspace) }
        let (collection, model) = try Self.tinyCollection(in: workspace)

        let run = try Binaries.run("cairn", ["eval", collection, "--json", "--model-dir", model, "--no-cache", "--keep",
                                             "--approximate-lexical-above", "0", "--lexical-postings-above", setting,
                                             "--approximate-dense-above", setting,
                                             "--per-query", workspace + "/per-query.jsonl", "--sync-timeout", "120"], in: workspace)
        let kept = run.error.split(separator: "\n").compactMap { line in line.range(of: "kept ").map { String(line[$0.upperBound...]) } }.last
        defer { if let kept { try? FileManager.default.removeItem(atPath: kept) } }
        #expect(run.status == 0, "cairn eval failed: \(run.error)")
        let config = try String(contentsOfFile: try #require(kept, "no kept folder in: \(run.error)") + "/cairnd.conf", encoding: .utf8)
        #expect(config.contains("approximate_lexical_above = 0\n") && config.contains("lexical_postings_above = \(setting)\n")
                && config.contains("approximate_dense_above = \(setting)\n"), "\(config)")
        _ = try Self.expectHandComputedLexical(JSONDecoder().decode(Report.self, from: Data(run.output.utf8)))
    }

    @Test("Given a search setting that is neither a number of rows nor never, when cairn eval starts, then it refuses, naming the option, before publishing anything",
          arguments: ["--lexical-postings-above", "--approximate-dense-above", "--approximate-lexical-above"])
    func badRowsSetting(option: String) throws {
        let workspace = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: workspace) }
        let (collection, model) = try Self.tinyCollection(in: workspace)
        let run = try Binaries.run("cairn", ["eval", collection, "--model-dir", model, "--no-cache", option, "sometimes"], in: workspace)
        #expect(run.status != 0)
        #expect(run.error.contains("\(option) must be 0 or more, or never"), "\(run.error)")
        // The collection's empty document is reported while the corpus is prepared to publish.
        #expect(!run.error.contains("documents with empty text left out"), "\(run.error)")
    }

    @Test("Given a judged query longer than cairnd takes, or empty, when cairn eval starts, then it exits 65 naming the file and the query, before publishing anything",
          arguments: [String(repeating: "water ", count: 700), "   ", "\u{200B}"])
    func unaskableQueryRefused(text: String) throws {
        let workspace = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: workspace) }
        let (collection, model) = try Self.tinyCollection(in: workspace)
        let line = String(decoding: try JSONSerialization.data(withJSONObject: ["_id": "q1", "text": text]), as: UTF8.self)
        try ([line] + Self.queries.dropFirst()).joined(separator: "\n").write(toFile: collection + "/queries.jsonl", atomically: true,
                                                                             encoding: .utf8)
        let run = try Binaries.run("cairn", ["eval", collection, "--model-dir", model, "--no-cache"], in: workspace)
        #expect(run.status == 65 && run.error.contains("queries.jsonl: query \"q1\""), "\(run.error)")
        #expect(!run.error.contains("documents with empty text left out"), "\(run.error)")
    }

    @Test("Given cairn eval running with its cairnd, when interrupted (Ctrl-C reaches only cairn: Foundation starts cairnd in a process group of its own), then cairnd, started with a configuration of its own, is stopped, the temporary folder removed, and cairn exits 130")
    func interruptStopsCairnd() async throws {
        let workspace = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: workspace) }
        let (tiny, model) = try Self.tinyCollection(in: workspace)
        // Queried for seconds, not milliseconds: 400 judged queries (each of the tiny
        // collection's documents judged for 100 phrasings). The tiny collection's three queries
        // ended before this poll saw its cairnd, five runs in a row, in a full suite on 2 cores
        // (2026-12-06).
        let collection = workspace + "/many"
        try FileManager.default.createDirectory(atPath: collection + "/qrels", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: tiny + "/corpus.jsonl", toPath: collection + "/corpus.jsonl")
        let phrasings = (0..<400).map { (id: "q\($0)", text: ["storm shelter", "generator outdoors", "crank radio news", "boil water"][$0 % 4] + " \($0)") }
        try (phrasings.map { #"{"_id": "\#($0.id)", "text": "\#($0.text)"}"# }.joined(separator: "\n") + "\n")
            .write(toFile: collection + "/queries.jsonl", atomically: true, encoding: .utf8)
        try ("query-id\tcorpus-id\tscore\n" + phrasings.map { "\($0.id)\td\(Int($0.id.dropFirst())! % 4 + 3)\t1\n" }.joined())
            .write(toFile: collection + "/qrels/test.tsv", atomically: true, encoding: .utf8)
        // An evaluation can still end before its cairnd is seen on a starved machine: such a
        // run, exit 0, is tried again, up to five times.
        for attempt in 1...5 {
            let temporary = workspace + "/tmp\(attempt)"
            try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
            let eval = try launch(Products.path("cairn"), ["eval", collection, "--model-dir", model, "--no-cache",
                                                           "--per-query", workspace + "/per-query.jsonl", "--sync-timeout", "120"],
                                  logDirectory: workspace, environment: childEnvironment(["TMPDIR": temporary]))
            defer {
                if eval.isRunning { eval.terminate() }
                if let left = Self.cairnd(under: temporary) { kill(left.pid, SIGKILL) }  // only when the test fails
            }
            try await waitUntil("cairn eval starts its cairnd", seconds: 120) { Self.cairnd(under: temporary) != nil || !eval.isRunning }
            if let (_, arguments) = Self.cairnd(under: temporary) {
                // Never the device's /etc/cairn/cairnd.conf.
                #expect(arguments.contains("--config"), "\(arguments)")
                // It has seconds of queries still to send when its cairnd is first seen: its
                // handler runs long before it could end (and it yields to the handler if so).
                kill(eval.processIdentifier, SIGINT)
            }
            try await waitUntil("cairn eval exits", seconds: 60) { !eval.isRunning }
            if eval.terminationStatus == 0 && attempt < 5 { continue }
            #expect(eval.terminationStatus == 130)
            #expect(Self.cairnd(under: temporary) == nil)
            // (cairn-publish-<uid> is the publisher's own folder for its scratch folders, kept.)
            let left = (try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? ["?"]
            #expect(!left.contains { $0.hasPrefix("cairn-eval-") || $0 == "?" }, "\(left)")
            break
        }
    }

    /// A running cairnd whose arguments name a path under `folder`: its pid and arguments.
    static func cairnd(under folder: String) -> (pid: pid_t, arguments: [String])? {
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where entry.allSatisfy(\.isNumber) {
            guard let bytes = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { continue }
            let arguments = bytes.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            if arguments.first?.hasSuffix("/cairnd") == true, arguments.contains(where: { $0.hasPrefix(folder) }) {
                return (pid_t(entry) ?? 0, arguments)
            }
        }
        return nil
    }
}
