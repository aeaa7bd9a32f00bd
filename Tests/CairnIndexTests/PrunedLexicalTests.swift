import CairnCore
@testable import CairnIndex
import CairnTestSupport
import Foundation
import Testing

/// Lexical search over a large index scores only the rows of a query's rarest tokens (MaxScore,
/// `RankingConfiguration.approximateLexicalAbove`); forced on here at test size, against the
/// same index searched whole.
@Suite("Lexical search pruned to the rarest tokens' rows")
struct PrunedLexicalTests {
    static let pruning = RankingConfiguration(approximateLexicalAbove: 0, lexicalPostingsAbove: .max)
    static let whole = RankingConfiguration(approximateLexicalAbove: .max)

    /// 4,000 rows of words drawn with Zipf frequencies (the first words in most rows, the last
    /// in a handful), titles from the same words, and a few repeated words, so that the tf parts
    /// and row lengths vary; random 32-dimensional vectors (spread enough for hybrid fusion).
    static func entries() -> [ChunkRecord] {
        var random = SplitMix64(seed: 7)
        let words = (0..<400).map { "w\($0)" }
        let weights = words.indices.map { 1 / Double($0 + 1) }
        let total = weights.reduce(0, +)
        func word() -> String {
            var pick = Double(random.next() % 1_000_000) / 1_000_000 * total
            for (index, weight) in weights.enumerated() {
                pick -= weight
                if pick <= 0 { return words[index] }
            }
            return words[words.count - 1]
        }
        return (0..<4_000).map { index in
            let length = 4 + Int(random.next() % 40)
            let content = (0..<length).map { _ in word() }.joined(separator: " ")
            let title = (0..<Int(random.next() % 3)).map { _ in word() }.joined(separator: " ")
            return ChunkRecord(chunk: Chunk(id: String(format: "r%05d", index), title: title, content: content),
                               vector: unit((0..<32).map { _ in random.normal() }))
        }
    }

    /// `entries` written to an index in `directory`, opened with pruning forced and without.
    static func indexes(_ entries: [ChunkRecord], in directory: String) throws -> (pruned: SearchIndex, whole: SearchIndex) {
        let path = (directory as NSString).appendingPathComponent("index.sqlite")
        try SnapshotWriter.create(at: path, meta: SnapshotMeta(channel: "test", version: 1, dimension: 32, modelID: "synthetic",
                                                               entries: entries), entries: entries)
        return (try SearchIndex(path: path, configuration: pruning), try SearchIndex(path: path, configuration: whole))
    }

    static let queries = [
        "w0 w1 w150", "w2 w3 w4 w300", "w0 w5 w60 w61 w62", "w1 w2", "w7 w8 w9 w10 w11 w12 w200 w399",
        "w3 w40", "w0 w1 w2 w3 w4 w5", "w100 w101 w0", "w20 w30 w250 w251", "w6 w350",
    ]

    @Test("Given rows of Zipf-distributed words, when lexical queries of frequent and rare words are searched pruned and whole, then the lists are the same rows in the same order with the same scores, and the spread of the lexical score is within 5%")
    func prunedEqualsWhole() throws {
        try withTemporaryDirectory { directory in
            let (pruned, whole) = try Self.indexes(Self.entries(), in: directory)
            var prunedAny = false
            for query in Self.queries {
                for (mode, k) in [(SearchRequest.Mode.lexical, 10), (.lexical, 100), (.hybrid, 10)] {
                    let request = SearchRequest(query: query, k: k, mode: mode)
                    let vector = unit((0..<32).map { Float($0 % 5) - 2 })
                    let a = try pruned.search(request, queryVector: vector), b = try whole.search(request, queryVector: vector)
                    #expect(!a.results.isEmpty)
                    if mode == .lexical {
                        #expect(a.results.map(\.chunk.id) == b.results.map(\.chunk.id), "\(query) k=\(k)")
                        for (x, y) in zip(a.results, b.results) { #expect(abs(x.fusedScore - y.fusedScore) < 1e-9) }
                    } else {
                        let (m, w) = (try #require(a.hybridMoments), try #require(b.hybridMoments))
                        func spread(_ count: Int, _ sum: Double, _ squares: Double) -> Double {
                            (squares / Double(count) - (sum / Double(count)) * (sum / Double(count))).squareRoot()
                        }
                        let (s, t) = (spread(m.lexicalCount, m.lexicalSum, m.lexicalSquares), spread(w.lexicalCount, w.lexicalSum, w.lexicalSquares))
                        #expect(m.lexicalCount == w.lexicalCount && abs(s / t - 1) < 0.05, "\(query): spread \(s) against \(t)")
                        if m.lexicalSquares != w.lexicalSquares { prunedAny = true }
                    }
                }
            }
            // Some queries were answered without scoring every matching row.
            #expect(prunedAny)
        }
    }

    /// Queries of common words of similar weight, none able to reach a full list alone.
    static let commonQueries = [
        "w2 w3 w4 w5 w6", "w3 w4 w5 w6 w7 w8", "w1 w4 w9 w12", "w5 w6 w7 w8 w9 w10 w11", "w2 w6 w10 w14 w18 w22",
        "w8 w9 w10 w11", "w12 w13 w14 w15 w16", "w0 w20 w21 w22 w23 w24",
    ]

    @Test("Given common words of similar weight, when no word alone can reach the list, then only the rows holding a set of them that can are scored, and the lists equal the whole search's")
    func coversEqualWhole() throws {
        try withTemporaryDirectory { directory in
            let (pruned, whole) = try Self.indexes(Self.entries(), in: directory)
            var covered = 0
            for query in Self.commonQueries {
                for limit in [5, 10, 40] {
                    let a = try pruned.lexical(query, limit: limit, mask: nil), b = try whole.lexical(query, limit: limit, mask: nil)
                    #expect(a.list.map(\.id) == b.list.map(\.id), "\(query) limit \(limit)")
                    for (x, y) in zip(a.list, b.list) { #expect(abs(x.score - y.score) < 1e-9) }
                    if a.covered { covered += 1 }
                }
            }
            // The mechanism ran, not only the word-by-word one.
            #expect(covered > 0)
        }
    }

    @Test("Given word bounds and a threshold, the covers are every smallest set of words reaching it, each once, and none beyond the limit")
    func coversAreTheMinimalSets() {
        var random = SplitMix64(seed: 11)
        for _ in 0..<200 {
            let words = Array(0..<(2 + Int(random.next() % 7)))
            // Fine-grained values, so that no sum of bounds ties the threshold to rounding.
            let bound = words.map { _ in 0.5 + Double(random.next() % 1_000_000) / 100_003.7 }
            let threshold = bound.max()! + 0.01 + Double(random.next() % 1_000_000) / 100_003.7
            guard let covers = SearchIndex.covers(words, bound: bound, threshold: threshold, atMost: 1_000) else {
                Issue.record("no covers under a limit of 1,000 for \(words.count) words")
                continue
            }
            let sum = { (set: [Int]) in set.reduce(0) { $0 + bound[$1] } }
            // Every subset of the words that reaches the threshold is minimal exactly when it is listed.
            var expected: Set<Set<Int>> = []
            for mask in 1..<(1 << words.count) {
                let set = words.filter { mask & (1 << $0) != 0 }
                if sum(set) >= threshold, set.allSatisfy({ sum(set) - bound[$0] < threshold }) { expected.insert(Set(set)) }
            }
            #expect(Set(covers.map(Set.init)) == expected)
            #expect(covers.count == expected.count)
            if expected.count > 1 {
                #expect(SearchIndex.covers(words, bound: bound, threshold: threshold, atMost: expected.count - 1) == nil)
            }
        }
    }

    /// 3,000 rows of about ten words: 40 rows of 26 holding the rare word "r" once; for each
    /// pair of the common words ka, kb, kc, kd, three rows of six holding that pair three times each
    /// and no other word; 900 rows for each common word holding it alone; fillers. A query
    /// "r ka kb kc kd" fills its list of 30 from r's rows, with a last score (about 2.6) that no common
    /// word reaches alone (its bound is about 1.8) but each pair does (3.7): the best rows are
    /// the pairs' (2.9), and a cover that missed a pair would miss its rows.
    static func pairEntries() -> [ChunkRecord] {
        var random = SplitMix64(seed: 5)
        let common = ["ka", "kb", "kc", "kd"]
        func fillers(_ count: Int, _ seed: Int) -> [String] { (0..<count).map { "f\(($0 * 7 + seed) % 500)" } }
        var contents: [String] = (0..<40).map { index in (["r"] + fillers(25, index)).joined(separator: " ") }
        for (first, x) in common.enumerated() {
            for y in common[(first + 1)...] {
                contents += (0..<3).map { _ in "\(x) \(x) \(x) \(y) \(y) \(y)" }
            }
        }
        for word in common { contents += (0..<900).map { index in ([word] + fillers(9, index)).joined(separator: " ") } }
        while contents.count < 3_000 { contents.append(fillers(10, contents.count).joined(separator: " ")) }
        return contents.enumerated().map { index, content in
            ChunkRecord(chunk: Chunk(id: String(format: "p%05d", index), title: "", content: content),
                        vector: unit((0..<32).map { _ in random.normal() }))
        }
    }

    @Test("Given rows whose best hold exactly one pair of common words, when a query's list is full from a rare word's rows, then the cover finds every pair's rows and the list equals the whole search's")
    func coverFindsEveryPair() throws {
        try withTemporaryDirectory { directory in
            let entries = Self.pairEntries()
            let (pruned, whole) = try Self.indexes(entries, in: directory)
            let a = try pruned.lexical("r ka kb kc kd", limit: 30, mask: nil), b = try whole.lexical("r ka kb kc kd", limit: 30, mask: nil)
            #expect(a.covered)
            #expect(a.list.map(\.id) == b.list.map(\.id))
            // Every pair's rows are in the list.
            let pairRows = Set(entries[40..<58].map(\.chunk.id))
            #expect(pairRows.isSubset(of: a.list.map(\.id)))
        }
    }
}
