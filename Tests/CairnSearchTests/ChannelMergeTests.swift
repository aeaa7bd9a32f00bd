import CairnCore
import CairnIndex
@testable import CairnSearch
import Testing

/// Merging the answers of several channels (`SearchEndpoint.merge`): labels, order, k, and the
/// hybrid scores taken again over the union of the channels' rows.
@Suite("Merging channels' answers")
struct ChannelMergeTests {
    static func answer(version: Int, results: [(id: String, lexical: Double?, dense: Double, fused: Double)],
                       moments: HybridMoments?, fusion: SearchResponse.Fusion = .weighted) -> SearchAnswer {
        var response = SearchResponse(
            results: results.enumerated().map { index, r in
                SearchResult(rank: index + 1, chunk: Chunk(id: r.id, title: r.id, content: r.id), lexicalScore: r.lexical,
                             denseScore: r.dense, fusedScore: r.fused)
            },
            version: version, stateRoot: String(repeating: "0", count: 64), mode: .hybrid, fusion: fusion,
            denseAvailable: true, timings: .init(lexicalMilliseconds: 0, denseMilliseconds: 0, totalMilliseconds: 0))
        response.hybridMoments = moments
        return SearchAnswer(response, denseAvailable: true, flags: .init(online: true, stale: false),
                            embedMilliseconds: 0, totalMilliseconds: 0)
    }

    static func moments(lexical: [Double], dense: [Double]) -> HybridMoments {
        var m = HybridMoments(lexicalWeight: 0.2, denseWeight: 0.8)
        (m.lexicalCount, m.lexicalSum, m.lexicalSquares) = (lexical.count, lexical.reduce(0, +), lexical.map { $0 * $0 }.reduce(0, +))
        (m.denseCount, m.denseSum, m.denseSquares) = (dense.count, dense.reduce(0, +), dense.map { $0 * $0 }.reduce(0, +))
        return m
    }

    @Test("Given a big channel and a three-row one, when merged, then scores are z over the union: the small channel's weaker passage no longer outranks the big one's stronger")
    func pooledHybrid() {
        // Big: 20 rows, cosines spread 0.1…0.58; its best passage has cosine 0.6 and a lexical match 8,
        // and scored 1.2 against its own channel's spread (below the small channel's 1.41).
        let bigDense = (0..<19).map { 0.1 + Double($0) * 0.025 } + [0.6]
        let bigLexical = [Double](repeating: 0, count: 17) + [2, 4, 8]
        let big = Self.answer(version: 7, results: [("big-best", 8, 0.6, 1.2)], moments: Self.moments(lexical: bigLexical, dense: bigDense))
        // Small: 3 rows; its best has cosine 0.3 and lexical 1: locally z ≈ +1.4 on both, fused ≈ 1.41.
        let small = Self.answer(version: 2, results: [("small-best", 1, 0.3, 1.41)],
                                moments: Self.moments(lexical: [0, 0, 1], dense: [0.1, 0.2, 0.3]))
        let merged = SearchEndpoint.merge([("big", big), ("small", small)], k: 2)
        #expect(merged.results.map(\.chunk.id) == ["big-best", "small-best"])
        // Expected from the pooled rows themselves, not from HybridMoments (which merge uses):
        // 0.2 × z(lexical) + 0.8 × z(cosine), population mean and deviation over all 23 rows.
        func z(_ value: Double, over values: [Double]) -> Double {
            let mean = values.reduce(0, +) / Double(values.count)
            let deviation = (values.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(values.count)).squareRoot()
            return (value - mean) / deviation
        }
        let (lexical, dense) = (bigLexical + [0, 0, 1], bigDense + [0.1, 0.2, 0.3])
        #expect(abs(merged.results[0].fusedScore - (0.2 * z(8, over: lexical) + 0.8 * z(0.6, over: dense))) < 1e-9)
        #expect(abs(merged.results[1].fusedScore - (0.2 * z(1, over: lexical) + 0.8 * z(0.3, over: dense))) < 1e-9)
        #expect(merged.results.map(\.channel) == ["big", "small"] && merged.results.map(\.version) == [7, 2])
        #expect(merged.results.map(\.rank) == [1, 2])
        #expect(merged.channels?.map(\.channel) == ["big", "small"])
    }

    @Test("Given one channel, when merged, then its answer is unchanged but labelled, with no channels list unless several were searched; given k = 1 over two, then one result")
    func singleAndCut() {
        let only = Self.answer(version: 3, results: [("a", 1, 0.5, 2.0), ("b", nil, 0.4, 1.0)], moments: Self.moments(lexical: [1, 0], dense: [0.5, 0.4]))
        let alone = SearchEndpoint.merge([("field", only)], k: 5)
        #expect(alone.results.map(\.fusedScore) == [2.0, 1.0] && alone.results.allSatisfy { $0.channel == "field" && $0.version == 3 })
        #expect(alone.channels == nil)
        // Two searched, one answered (the other has nothing installed): the list says which.
        let lone = SearchEndpoint.merge([("manuals", only)], k: 5, searched: 2)
        #expect(lone.channels?.map(\.channel) == ["manuals"] && lone.channels?.first?.version == 3)
        #expect(lone.results.map(\.fusedScore) == [2.0, 1.0])
        let other = Self.answer(version: 1, results: [("c", nil, 0.45, 1.5)], moments: Self.moments(lexical: [0, 0], dense: [0.45, 0.1]))
        #expect(SearchEndpoint.merge([("field", only), ("tools", other)], k: 1).results.count == 1)
    }

    @Test("Given two channels' unmatched filter values, when merged, then only what neither channel has stays unmatched")
    func unmatchedOverChannels() {
        typealias Unmatched = SearchResponse.UnmatchedFilter
        let field = Unmatched(scenario: "fire", scenarios: ["flood", "general"], tags: ["pumps", "Water"], similarTags: ["water"])
        let tools = Unmatched(scenario: nil, scenarios: nil, tags: ["Water"], similarTags: [])
        let both = Unmatched.common([field, tools])
        #expect(both?.scenario == nil && both?.scenarios == nil)  // tools has "fire"
        #expect(both?.tags == ["Water"] && both?.similarTags == ["water"])
        #expect(Unmatched.common([field, nil]) == nil)  // the second channel matched everything
        #expect(Unmatched.common([field]) == field)
    }

    @Test("Given one channel ranked lexically (its cosines degenerate: -BM25 15 and 10) and one by weighted hybrid (2.0 and 1.5), when merged, then they interleave by rank, each fused_score 1/(60 + rank), fusion rrf")
    func mixedFusionsByRank() {
        let lexical = Self.answer(version: 4, results: [("l1", 15, 0, 15), ("l2", 10, 0, 10)], moments: nil, fusion: .lexicalFallback)
        let hybrid = Self.answer(version: 9, results: [("h1", 3, 0.7, 2.0), ("h2", 1, 0.6, 1.5)],
                                 moments: Self.moments(lexical: [3, 1], dense: [0.7, 0.6]))
        let merged = SearchEndpoint.merge([("hybrid", hybrid), ("lexical", lexical)], k: 4)
        #expect(merged.results.map(\.chunk.id) == ["h1", "l1", "h2", "l2"])
        let expected: [Double] = [1 / 61, 1 / 61, 1 / 62, 1 / 62]
        #expect(merged.results.map(\.fusedScore) == expected)
        #expect(merged.fusion == .rrf)
        // The same two channels both weighted: scores, not ranks, decide (pooled).
        let alike = SearchEndpoint.merge([("hybrid", hybrid), ("other", hybrid)], k: 4)
        #expect(alike.fusion == .weighted && alike.results.first?.fusedScore != expected[0])
    }

    @Test("Given the daemon's own channel with a model and another without one (it answers lexically), when merged, then dense_available is false and each channel's entry says how it ranked and whether it had a model")
    func eachChannelSaysHowItRanked() {
        let hybrid = Self.answer(version: 9, results: [("h1", 3, 0.7, 2.0)], moments: Self.moments(lexical: [3, 1], dense: [0.7, 0.6]))
        var lexical = Self.answer(version: 4, results: [("l1", 15, 0, 15)], moments: nil, fusion: .lexicalFallback)
        (lexical.mode, lexical.denseAvailable) = (.lexical, false)
        let merged = SearchEndpoint.merge([("field", hybrid), ("tools", lexical)], k: 2)
        #expect(!merged.denseAvailable)
        let entries = merged.channels ?? []
        #expect(entries.map(\.mode) == [.hybrid, .lexical] && entries.map(\.fusion) == [.weighted, .lexicalFallback]
                && entries.map(\.denseAvailable) == [true, false], "\(entries)")
        #expect(SearchEndpoint.merge([("field", hybrid), ("other", hybrid)], k: 2).denseAvailable)
    }
}
