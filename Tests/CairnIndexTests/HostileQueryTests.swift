import CairnCore
import CairnIndex
import Testing

@Suite struct HostileQueryTests {
    static let hostile: [String] = [
        "\"", "\"\"", "\"unterminated", "AND", "OR OR OR", "NOT", "water AND", "NEAR(", "NEAR(water fire, 2)",
        "*", "water*", "-", "-water", "col:", "title:kerosene", "^water", "(", ")(", "{title content}: x",
        "🌊🔥", "💧 water", "避難所", "ماء", "", " ", "   \n\t ", "\u{0}", "a\u{0}b", "'; DROP TABLE chunks; --",
        "\u{301}", "x\u{345}", "²", "water \u{301}",
        String(repeating: "water ", count: 2_000), String(repeating: "\"", count: 500),
    ]

    @Test(arguments: hostile)
    func givenHostileText_whenSearchingInEveryMode_thenNothingThrowsAndResultsAreBounded(query: String) throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))

            for mode in SearchRequest.Mode.allCases {
                for vector in [unit(1, 0, 0, 0), nil] {
                    let response = try index.search(SearchRequest(query: query, k: 5, mode: mode), queryVector: vector)
                    #expect(response.results.count <= 5)
                    #expect(response.results.map(\.rank) == Array(1..<(response.results.count + 1)))
                }
            }
        }
    }

    @Test func givenQuerySyntaxAroundRealWords_whenSearchingLexically_thenTheWordsStillMatch() throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))
            func top(_ query: String) throws -> String? {
                try index.search(SearchRequest(query: query, mode: .lexical), queryVector: nil).results.first?.chunk.id
            }

            #expect(try top("\"tourniquet\" AND NOT") == "aid-bleeding")
            #expect(try top("NEAR(tourniquet*") == "aid-bleeding")
            #expect(try top("title:kerosene") == "lamp-kerosene")
            #expect(try top("避難所") == "shelter-jp")
            #expect(try top("cafe") == "shelter-jp")        // diacritics removed on both sides
            #expect(try top("CAFÉ") == "shelter-jp")
        }
    }

    @Test("Given a query typed decomposed (NFD: Hangul as jamo, kana with a combining mark) against precomposed text, then it matches lexically")
    func decomposedQueries() throws {
        try withTemporaryDirectory { directory in
            let entries = [
                ChunkRecord(chunk: Chunk(id: "korea", title: "한국", content: "대피소 안내 がっこう", scenario: nil, tags: []), vector: unit(1, 0, 0, 0)),
                ChunkRecord(chunk: Chunk(id: "water", title: "note", content: "water the supply", scenario: nil, tags: []), vector: unit(0, 0, 1, 0)),
            ]
            let index = try SearchIndex(path: Corpus.snapshot(in: directory, entries: entries))
            func lexical(_ query: String) throws -> [SearchResult] {
                try index.search(SearchRequest(query: query, mode: .lexical), queryVector: nil).results
            }
            for query in ["한국", "がっこう"] {
                let decomposed = query.decomposedStringWithCanonicalMapping
                #expect(Array(decomposed.unicodeScalars) != Array(query.unicodeScalars))
                #expect(try lexical(decomposed).first?.chunk.id == "korea", "\(Array(decomposed.unicodeScalars))")
            }
        }
    }

    @Test(arguments: ["", "   \n\t", "🌊", "*", "NEAR(", "-", "\""])
    func givenNoWords_whenSearching_thenLexicalIsEmptyAndHybridStillAnswersDensely(query: String) throws {
        try withTemporaryDirectory { directory in
            let index = try SearchIndex(path: Corpus.snapshot(in: directory))

            let lexical = try index.search(SearchRequest(query: query, mode: .lexical), queryVector: nil)
            let hybrid = try index.search(SearchRequest(query: query), queryVector: unit(0, 0, 0, 1))

            #expect(lexical.results.isEmpty)
            #expect(hybrid.results.first?.chunk.id == "aid-bleeding")
            #expect(hybrid.results.allSatisfy { $0.lexicalScore == nil })
        }
    }
}
