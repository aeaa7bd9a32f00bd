import CairnCore
@testable import CairnIndex
import Foundation
import Testing

@Suite struct SearchIndexTests {
    let water = unit(1, 0, 0, 0)

    func ids(_ response: SearchResponse) -> [String] { response.results.map(\.chunk.id) }

    @Test func givenARareWord_whenSearchingLexically_thenOnlyItsChunkIsFound() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))

            let response = try index.search(SearchRequest(query: "tourniquet", k: 5, mode: .lexical), queryVector: nil)

            #expect(ids(response) == ["aid-bleeding"])
            #expect(response.results[0].lexicalScore! > 0)
            #expect(response.results[0].denseScore == nil)
            #expect(response.results[0].rank == 1)
        }
    }

    @Test func givenAWordInOneTitleAndAnotherBody_whenSearchingLexically_thenTheTitleMatchRanksFirst() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))

            let response = try index.search(SearchRequest(query: "kerosene", k: 5, mode: .lexical), queryVector: nil)

            #expect(ids(response) == ["lamp-kerosene", "lighting"])
            #expect(response.results[0].fusedScore > response.results[1].fusedScore)
        }
    }

    @Test func givenAnInflectedWord_whenSearchingLexically_thenTheStemMatches() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))

            let response = try index.search(SearchRequest(query: "purify", mode: .lexical), queryVector: nil)

            #expect(ids(response).first == "water-purify")
        }
    }

    @Test func givenAQueryVector_whenSearchingDensely_thenChunksRankByCosineAboveTheFloor() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))

            let response = try index.search(SearchRequest(query: "", k: 10, mode: .dense), queryVector: water)

            // cos with e0: 1, 0.9939, 0.5, 0.5 (a tie, broken by id), 0.3011; the rest are 0.
            #expect(ids(response) == ["water-purify", "water-storage", "lamp-kerosene", "lighting", "aid-burns"])
            for result in response.results {
                let vector = Corpus.entries.first { $0.chunk.id == result.chunk.id }!.vector
                #expect(abs(result.denseScore! - dot(vector, water)) < 1e-6)
                #expect(result.fusedScore == result.denseScore)
            }
            #expect(response.mode == .dense && response.fusion == .none)
        }
    }

    @Test func givenAHigherMinimumSimilarity_whenSearchingDensely_thenWeakerMatchesAreDropped() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))

            let response = try index.search(SearchRequest(query: "", k: 10, mode: .dense, minSimilarity: 0.6), queryVector: water)

            #expect(ids(response) == ["water-purify", "water-storage"])
        }
    }

    @Test func givenBothLists_whenSearchingHybrid_thenFusedScoresAreWeightedZScoresOverEveryRow() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))
            let query = "water burns"
            let lexical = try index.search(SearchRequest(query: query, k: 100, mode: .lexical), queryVector: nil).results
            let dense = try index.search(SearchRequest(query: query, k: 100, mode: .dense), queryVector: water).results

            let hybrid = try index.search(SearchRequest(query: query, k: 100, mode: .hybrid), queryVector: water)

            // z-scores over all ten chunks: a chunk that does not match the words scores 0
            // lexically; every chunk has a cosine with the query.
            let lexicalScore = Dictionary(uniqueKeysWithValues: lexical.map { ($0.chunk.id, $0.fusedScore) })
            let cosine = Dictionary(uniqueKeysWithValues: Corpus.entries.map { ($0.chunk.id, dot($0.vector, water)) })
            func zScores(_ scores: [String: Double]) -> [String: Double] {
                let values = Corpus.entries.map { scores[$0.chunk.id] ?? 0 }
                let mean = values.reduce(0, +) / Double(values.count)
                let deviation = (values.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(values.count)).squareRoot()
                return scores.mapValues { ($0 - mean) / deviation }.merging(
                    Corpus.entries.map { ($0.chunk.id, (0 - mean) / deviation) }) { listed, _ in listed }
            }
            let lexicalZ = zScores(lexicalScore), denseZ = zScores(cosine)
            #expect(hybrid.fusion == .weighted && hybrid.mode == .hybrid && hybrid.denseAvailable)
            #expect(!lexical.isEmpty && !dense.isEmpty)
            #expect(Set(ids(hybrid)) == Set(lexical.map(\.chunk.id)).union(dense.map(\.chunk.id)))
            for result in hybrid.results {
                let id = result.chunk.id
                let weights = index.configuration
                #expect(abs(result.fusedScore - (weights.lexicalWeight * lexicalZ[id]! + weights.denseWeight * denseZ[id]!)) < 1e-9, "\(id)")
                #expect(abs(result.denseScore! - cosine[id]!) < 1e-6)
                #expect(result.lexicalScore == lexicalScore[id])
            }
            #expect(hybrid.results.map(\.fusedScore) == hybrid.results.map(\.fusedScore).sorted(by: >))
        }
    }

    @Test func givenBothLists_whenSearchingRRF_thenScoresAreReciprocalRankSums() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))
            let query = "water burns"
            let lexical = ids(try index.search(SearchRequest(query: query, k: 100, mode: .lexical), queryVector: nil))
            let dense = ids(try index.search(SearchRequest(query: query, k: 100, mode: .dense), queryVector: water))

            let rrf = try index.search(SearchRequest(query: query, k: 100, mode: .rrf), queryVector: water)

            #expect(rrf.fusion == .rrf && rrf.mode == .rrf)
            // The loop below checks something: results exist, every id of both lists is one, and
            // at least one sits in both lists, so a sum of two reciprocal ranks is checked.
            #expect(!rrf.results.isEmpty)
            #expect(Set(ids(rrf)) == Set(lexical + dense))
            #expect(rrf.results.contains { lexical.contains($0.chunk.id) && dense.contains($0.chunk.id) })
            for result in rrf.results {
                let expected = [lexical, dense].reduce(0.0) { sum, list in
                    sum + (list.firstIndex(of: result.chunk.id).map { 1 / (60 + Double($0 + 1)) } ?? 0)
                }
                #expect(abs(result.fusedScore - expected) < 1e-12)
            }
        }
    }

    @Test func givenNearlyIdenticalVectors_whenSearchingHybrid_thenLexicalAloneRanks() throws {
        try withTemporaryDirectory { directory in
            let entries = (0..<5).map { i in
                ChunkRecord(chunk: Chunk(id: "c\(i)", title: "Note \(i)", content: i == 3 ? "Siphoning gasoline safely" : "Plain advice \(i)"),
                            vector: unit(1, 0.05 * Float(i), 0, 0))
            }
            let index = try SearchIndex(path: Corpus.snapshot(in: directory, entries: entries))

            let hybrid = try index.search(SearchRequest(query: "gasoline", k: 3), queryVector: water)
            let rrf = try index.search(SearchRequest(query: "gasoline", k: 3, mode: .rrf), queryVector: water)

            #expect(hybrid.fusion == .lexicalFallback && hybrid.mode == .lexical)
            #expect(rrf.fusion == .lexicalFallback)
            #expect(ids(hybrid) == ["c3"])
            #expect(hybrid.results[0].denseScore == nil)
            // No word matches: an empty lexical list does not replace the dense one.
            let unmatched = try index.search(SearchRequest(query: "zzzz", k: 3), queryVector: water)
            #expect(unmatched.fusion != .lexicalFallback && unmatched.results.count == 3, "\(unmatched.fusion)")
        }
    }

    @Test func givenSpreadOutVectors_whenSearchingHybrid_thenDenseIsNotJudgedDegenerate() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))

            let response = try index.search(SearchRequest(query: "water"), queryVector: water)

            #expect(response.fusion == .weighted)
        }
    }

    @Test(arguments: SearchRequest.Mode.allCases)
    func givenNoQueryVector_whenSearching_thenItDegradesToLexicalAndSaysSo(mode: SearchRequest.Mode) throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))

            let response = try index.search(SearchRequest(query: "tourniquet", mode: mode), queryVector: nil)

            #expect(response.mode == .lexical && response.fusion == .none && !response.denseAvailable)
            #expect(ids(response) == ["aid-bleeding"])
        }
    }

    @Test("Given each mode, with and without a model, when the query is embedded beside the lexical part, then the answer is the one the sequential search gives",
          arguments: SearchRequest.Mode.allCases)
    func overlappedSearchMatchesSequential(mode: SearchRequest.Mode) throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))
            let queries: [(String, [Float])] = [("boil water", unit(1, 0.1, 0, 0)), ("children ventilation", unit(0.3, 0.3, 0.3, 0.3)),
                                                ("earthquake shelter", unit(0, 0.5, 0.9, 0)), ("tourniquet", unit(0, 0, 0, 1))]
            for (query, vector) in queries {
                for available in [true, false] {
                    let request = SearchRequest(query: query, k: 5, mode: mode, scenario: query == "boil water" ? "flood" : nil)
                    var embedded = 0
                    let overlapped = try index.search(request) { () -> [Float]? in
                        embedded += 1
                        return available ? vector : nil
                    }
                    let sequential = try index.search(request, queryVector: available ? vector : nil)
                    #expect(overlapped.results == sequential.results, "\(mode) \(query) model: \(available)")
                    #expect(overlapped.mode == sequential.mode && overlapped.fusion == sequential.fusion)
                    #expect(overlapped.denseAvailable == sequential.denseAvailable)
                    #expect(embedded == (mode == .lexical ? 0 : 1))
                }
            }
        }
    }

    @Test("Given a word in half the chunks or more, when searched with a rarer one, then it is left out of the match; alone, or under a filter that lets none of the rarer word's rows through, it still matches")
    func uninformativeTokens() throws {
        try withTemporaryDirectory { directory in
            let entries: [ChunkRecord] = (0..<8).map { index in
                let words = index < 3 ? "common words here" : "other words there"
                let rare = index == 1 || index == 6 ? " with a rare lantern" : ""
                return ChunkRecord(chunk: Chunk(id: "c\(index)", title: "Chunk \(index)", content: words + rare,
                                                scenario: rare.isEmpty ? "flood" : "fire"),
                                   vector: unit(1, Float(index), 0, 0))
            }
            let index = try SearchIndex(path: Corpus.snapshot(in: directory, entries: entries))
            func found(_ query: String, scenario: String? = nil) throws -> [String] {
                try index.search(SearchRequest(query: query, k: 10, mode: .lexical, scenario: scenario), queryVector: nil).results.map(\.chunk.id)
            }
            #expect(try Set(found("words lantern")) == ["c1", "c6"])       // "words" is in all 8 rows
            #expect(try Set(found("common lantern")) == ["c0", "c1", "c2", "c6"])  // "common" in 3 of 8: kept
            #expect(try found("words").count == 8)
            // A word in no row (a typo) beside a common one: the common one still answers.
            #expect(try found("words zzzz").count == 8)
            // A filter that lets through none of the rare word's rows: the common word answers.
            #expect(try Set(found("words lantern", scenario: "flood")) == ["c0", "c2", "c3", "c4", "c5", "c7"])
            #expect(try Set(found("words lantern", scenario: "fire")) == ["c1", "c6"])
        }
        #expect(SearchIndex.informative(["a", "typo"], counts: [5, 0], rows: 10) == (["a", "typo"], [5, 0]))
        #expect(SearchIndex.informative(["a", "b"], counts: [5, 4], rows: 10) == (["b"], [4]))  // 5 of 10: IDF clamped
        #expect(SearchIndex.informative(["a"], counts: [9], rows: 10) == (["a"], [9]))
    }

    @Test func givenAScenarioFilter_whenSearching_thenOnlyThatScenarioAndGeneralChunksAreReturned() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))
            let allowed = Set(Corpus.entries.filter { ["flood", "general"].contains($0.chunk.scenario) }.map(\.chunk.id))

            let response = try index.search(SearchRequest(query: "water", k: 100, scenario: "flood"), queryVector: water)
            let unknown = try index.search(SearchRequest(query: "water kerosene", k: 100, scenario: "volcano"), queryVector: water)

            #expect(Set(ids(response)).isSubset(of: allowed))
            #expect(ids(response).contains("aid-burns"))          // general, "running water"
            #expect(!ids(response).contains("lighting"))          // no scenario, dense 0.5
            #expect(Set(ids(unknown)) == ["lamp-kerosene", "aid-burns"])
        }
    }

    @Test("Given a scenario or tags no chunk has (a caller's guess: Flood, Water), when searching, then the answer says which values matched nothing and lists the scenarios and the tags differing only in case; values that match say nothing")
    func unmatchedFilterValuesAreSaid() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))
            let known = try index.search(SearchRequest(query: "water", k: 5, scenario: "flood", tags: ["health"]), queryVector: water)
            #expect(known.unmatchedFilter == nil)
            let guessed = try index.search(SearchRequest(query: "water", k: 5, scenario: "Flood", tags: ["Water", "health", "Water"]),
                                           queryVector: water)
            let unmatched = try #require(guessed.unmatchedFilter)
            #expect(unmatched.scenario == "Flood" && unmatched.scenarios == ["earthquake", "flood", "general"])
            #expect(unmatched.tags == ["Water"] && unmatched.similarTags == ["water"])
            #expect(guessed.results.isEmpty)  // what the unknown tag did, now said
            #expect(unmatched.sentence.contains("no passage has scenario \"Flood\"") && unmatched.sentence.contains("differing only in case: water"))
            // On the wire each part only when it applies: no empty lists.
            let scenarioOnly = SearchResponse.UnmatchedFilter(scenario: "Flood", scenarios: ["flood"])
            let wire = try JSONSerialization.jsonObject(with: JSONEncoder().encode(scenarioOnly)) as? [String: Any]
            #expect(Set(wire?.keys.map { $0 } ?? []) == ["scenario", "scenarios"], "\(String(describing: wire))")
        }
    }

    @Test func givenATagFilter_whenSearching_thenOnlyChunksWithEveryTagAreReturned() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))

            let health = try index.search(SearchRequest(query: "water", k: 100, tags: ["health"]), queryVector: water)
            let both = try index.search(SearchRequest(query: "water", k: 100, tags: ["health", "water"]), queryVector: water)

            #expect(Set(ids(health)) == ["water-purify", "aid-burns"])
            #expect(ids(both) == ["water-purify"])
        }
    }

    @Test func givenAnIndex_whenFetchingChunksAndMeta_thenTheyMatchWhatWasWritten() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))

            #expect(try index.chunk(id: "water-purify") == Corpus.entries[0].chunk)
            #expect(try index.chunk(id: "shelter-jp") == Corpus.entries[9].chunk)
            #expect(try index.chunk(id: "missing") == nil)
            #expect(index.count == Corpus.entries.count)
            #expect(index.meta == Corpus.meta())
        }
    }

    @Test func givenCanaries_whenChecking_thenOnlyFoundExpectationsPassInTheCanarysMode() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))

            #expect(index.passes(Canary(query: "stop the bleeding tourniquet", expect: ["aid-bleeding"], k: 3), queryVector: unit(0, 0, 0, 1)))
            #expect(index.passes(Canary(query: "tourniquet", expect: ["aid-bleeding"], k: 3), queryVector: nil))
            #expect(!index.passes(Canary(query: "tourniquet", expect: ["quake-cover"], k: 3), queryVector: nil))
            #expect(!index.passes(Canary(query: "tourniquet", expect: ["aid-bleeding"], k: 0), queryVector: nil))
            // Each canary in its own mode: with a query vector far from the chunk (water's axis),
            // hybrid and lexical still find it by its word in the top 10 (every chunk); dense
            // does not (its similarity is under the floor).
            let water = unit(1, 0, 0, 0)
            #expect(index.passes(Canary(query: "tourniquet", expect: ["aid-bleeding"], k: 10), queryVector: water))
            #expect(index.passes(Canary(query: "tourniquet", expect: ["aid-bleeding"], k: 10, mode: "lexical"), queryVector: water))
            #expect(!index.passes(Canary(query: "tourniquet", expect: ["aid-bleeding"], k: 10, mode: "dense"), queryVector: water))
            // k above 100 (a canaries file allows up to 1000) is the top 100, as on a device.
            #expect(index.passes(Canary(query: "tourniquet", expect: ["aid-bleeding"], k: 150, mode: "lexical"), queryVector: nil))
        }
    }

    @Test func givenBadRequests_whenSearching_thenTheyAreRefusedWithoutQueryText() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))
            let secret = "secret-query-text"

            for (request, vector) in [(SearchRequest(query: secret, k: 0), water),
                                      (SearchRequest(query: secret, k: 101), water),
                                      (SearchRequest(query: secret), [Float](repeating: 0.5, count: 3))] {
                #expect { try index.search(request, queryVector: vector) } throws: { error in
                    guard let error = error as? IndexError else { return false }
                    return error.code == .invalidRequest && !error.message.contains(secret)
                }
            }
        }
    }

    @Test("Given 300 chunks whose int8 estimates order them against their exact cosines (all within the estimates' error), when a dense search asks for 3 and for 100, then the first 3 are the same: the rows rescored do not depend on k")
    func denseShortlistDoesNotFollowK() throws {
        // The second component quantizes to the same code for every row, so the estimates fall
        // with i while the exact cosines with (1, 1, 0, 0) rise.
        let entries = (0..<300).map { i in
            ChunkRecord(chunk: Chunk(id: String(format: "c%03d", i), title: "t", content: "row"), vector: unit(1, Float(i) * 1e-5, 0, 0))
        }
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory, entries: entries))
            let query = unit(1, 1, 0, 0)
            let shallow = try index.search(SearchRequest(query: "x", k: 3, mode: .dense), queryVector: query)
            let deep = try index.search(SearchRequest(query: "x", k: 100, mode: .dense), queryVector: query)
            #expect(ids(shallow) == Array(ids(deep).prefix(3)))
            #expect(ids(deep).prefix(3) == ["c299", "c298", "c297"])
        }
    }

    @Test("Given lexical queries of ever new 4,000-letter words (as a caller of online search may send), when searched, then the remembered word counts stay under their byte bound instead of growing to 50,000 such words")
    func documentCountsBoundedByBytes() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))
            var random = LinearCongruential(seed: 3)
            let letters = Array("abcdefghijklmnopqrstuvwxyz")
            for _ in 0..<1_500 {
                let word = String((0..<4_000).map { _ in letters[random.below(letters.count)] })
                _ = try index.search(SearchRequest(query: word, k: 3, mode: .lexical), queryVector: nil)
            }
            let held = index.documentCounts.held
            #expect(held.bytes <= DocumentCounts.byteCapacity && held.tokens < 1_500, "\(held)")
        }
    }

    @Test("Given 400 chunks and 40 queries, when k is 3 and when it is 100, then each mode's first 3 answers and their scores agree")
    func givenAnySmallK_whenComparedWithADeepRequest_thenTheFirstAnswersAreTheSame() throws {
        // A corpus where each list has more than 100 candidates, so a candidate list sized by k
        // (the old rule: max(100, 10k)) normalises over other candidates at k = 3 than at k = 100.
        var random = LinearCongruential(seed: 16)
        let words = (0..<40).map { "word\($0)" }
        func text(_ count: Int) -> String { (0..<count).map { _ in words[random.below(words.count)] }.joined(separator: " ") }
        func vector() -> [Float] { unit((0..<4).map { _ in Float(random.below(1_000)) / 500 - 1 }) }
        let entries = (0..<400).map { i in
            ChunkRecord(chunk: Chunk(id: String(format: "c%03d", i), title: text(2), content: text(12)), vector: vector())
        }
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory, entries: entries))
            var compared = 0
            for _ in 0..<40 {
                let (query, queryVector) = (text(3), vector())
                for mode in SearchRequest.Mode.allCases {
                    let shallow = try index.search(SearchRequest(query: query, k: 3, mode: mode), queryVector: queryVector)
                    let deep = try index.search(SearchRequest(query: query, k: 100, mode: mode), queryVector: queryVector)
                    #expect(shallow.results.count == 3 && deep.results.count >= 3)
                    #expect(ids(shallow) == Array(ids(deep).prefix(3)), "\(mode) \(query)")
                    #expect(shallow.results.map(\.fusedScore) == deep.results.prefix(3).map(\.fusedScore), "\(mode) \(query)")
                    compared += 1
                }
            }
            #expect(compared == 160)
        }
    }

    @Test func givenAResponse_whenEncoded_thenKeysAreSnakeCase() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))
            let response = try index.search(SearchRequest(query: "water"), queryVector: water)

            let json = String(decoding: try JSONEncoder().encode(response), as: UTF8.self)
            let decoded = try JSONDecoder().decode(SearchResponse.self, from: Data(json.utf8))
            let request = try JSONDecoder().decode(SearchRequest.self, from: Data(#"{"query":"x","min_similarity":0.5}"#.utf8))

            for key in ["state_root", "dense_available", "fused_score", "lexical_score", "dense_score", "lexical_ms", "total_ms", "\"fusion\":\"weighted\""] {
                #expect(json.contains(key))
            }
            // The hybrid moments stay in process (several channels pool them); the rest round-trips.
            #expect(response.hybridMoments != nil && !json.contains("Moments"))
            var wire = response
            wire.hybridMoments = nil
            #expect(decoded == wire)
            #expect(request == SearchRequest(query: "x", k: 3, mode: .hybrid, minSimilarity: 0.5))
        }
    }
}

/// A small deterministic generator (Knuth's MMIX constants), so a failing case is reproducible.
struct LinearCongruential {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func below(_ bound: Int) -> Int {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Int((state >> 33) % UInt64(bound))
    }
}
