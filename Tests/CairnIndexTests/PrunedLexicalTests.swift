import CairnCore
import CairnIndex
import CairnTestSupport
import Foundation
import Testing

/// Lexical search over a large index scores only the rows of a query's rarest tokens (MaxScore,
/// `RankingConfiguration.approximateLexicalAbove`); forced on here at test size, against the
/// same index searched whole.
@Suite("Lexical search pruned to the rarest tokens' rows")
struct PrunedLexicalTests {
    static let pruning = RankingConfiguration(approximateLexicalAbove: 0)
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

    static let queries = [
        "w0 w1 w150", "w2 w3 w4 w300", "w0 w5 w60 w61 w62", "w1 w2", "w7 w8 w9 w10 w11 w12 w200 w399",
        "w3 w40", "w0 w1 w2 w3 w4 w5", "w100 w101 w0", "w20 w30 w250 w251", "w6 w350",
    ]

    @Test("Given rows of Zipf-distributed words, when lexical queries of frequent and rare words are searched pruned and whole, then the lists are the same rows in the same order with the same scores, and the spread of the lexical score is within 5%")
    func prunedEqualsWhole() throws {
        try withTemporaryDirectory { directory in
            let path = (directory as NSString).appendingPathComponent("index.sqlite")
            let entries = Self.entries()
            try SnapshotWriter.create(at: path, meta: SnapshotMeta(channel: "test", version: 1, dimension: 32, modelID: "synthetic",
                                                                   entries: entries), entries: entries)
            let pruned = try SearchIndex(path: path, configuration: Self.pruning)
            let whole = try SearchIndex(path: path, configuration: Self.whole)
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
}
