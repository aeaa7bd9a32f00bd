import CairnIndex
import Testing

@Suite struct ConcurrencyTests {
    @Test func givenEightConcurrentTasks_whenSearching_thenEveryAnswerEqualsTheSerialOne() async throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let index = try SearchIndex(path: Corpus.snapshot(in: directory))
        let requests: [(SearchRequest, [Float]?)] = SearchRequest.Mode.allCases.flatMap { mode in
            [("water", unit(1, 0, 0, 0)), ("kerosene lamps", unit(0.5, 0.5, 0.5, 0.5)), ("tourniquet", nil),
             ("after the earthquake", unit(0, 0.2, 0.98, 0)), ("避難所", unit(0, 0.6, 0.8, 0))].map { query, vector in
                (SearchRequest(query: query, k: 5, mode: mode), vector)
            }
        } + [(SearchRequest(query: "water", k: 10, scenario: "flood"), unit(1, 0, 0, 0))]
        let serial = try requests.map { try index.search($0.0, queryVector: $0.1).results }

        let concurrent = try await withThrowingTaskGroup(of: [[SearchResult]].self) { group in
            for task in 0..<8 {
                group.addTask {
                    // Each task walks the requests from a different starting point, several times.
                    var answers = [[SearchResult]](repeating: [], count: requests.count)
                    for round in 0..<10 {
                        for offset in requests.indices {
                            let i = (offset + task * 3 + round) % requests.count
                            answers[i] = try index.search(requests[i].0, queryVector: requests[i].1).results
                        }
                    }
                    return answers
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }

        #expect(concurrent.count == 8)
        for answers in concurrent {
            #expect(answers == serial)
        }
    }
}
