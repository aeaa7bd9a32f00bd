import CairnClient
import CairnCore
import CairnDaemon
import CairnIndex
import CairnSearch
import CairnTestSupport
import Foundation
import Logging
import Testing

@Suite("Swapping versions under load", .offCooperativePool)
struct SwapTests {
    @Test("Given 8 clients querying in a loop, when the holder swaps between two versions 10 times, then no query fails and every answer's chunks belong to the version it names")
    func swapDuringQueries() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(1)
        try fixture.addVersion(2, activate: false)
        let versions = [try fixture.serving(1), try fixture.serving(2)]
        let holder = IndexHolder(versions[0], logger: Logger(label: "swap-test"))
        let swapsDone = Counter()
        // Answers from each version (index 0: version 1), so the swapper knows each was seen.
        let answered = [Counter(), Counter()]
        let answers = try await withDaemon(fixture, hooks: DaemonHooks(holder: holder)) { socket in
            try await withThrowingTaskGroup(of: [(Int, [String], Int)].self) { group in
                for client in 0..<8 {
                    group.addTask {
                        var seen: [(Int, [String], Int)] = []
                        let mode = ["hybrid", "lexical", "dense", "rrf"][client % 4]
                        // Each client keeps going until the swapper is done, and at least 5 times.
                        while swapsDone.value < 10 || seen.count < 5 {
                            let response = try await request(socket, "POST", "/v1/search",
                                                             json: #"{"query": "safe water flood", "k": 5, "mode": "\#(mode)", "min_similarity": -1}"#)
                            let answer = try decode(SearchAnswer.self, response)
                            seen.append((answer.version, answer.results.map(\.chunk.id), response.status))
                            answered[answer.version == 2 ? 1 : 0].increment()
                        }
                        return seen
                    }
                }
                group.addTask {
                    for swap in 1...10 {
                        // Let the version installed last answer 4 more queries before swapping again
                        // (counted per version: answers in flight across a swap come from the old one).
                        let current = (swap + 1) % 2
                        let mark = answered[current].value
                        try await waitUntil("4 more answers from version \(current + 1)", seconds: 60) {
                            answered[current].value >= mark + 4
                        }
                        holder.install(versions[swap % 2])
                        swapsDone.increment()
                    }
                    return []
                }
                var all: [(Int, [String], Int)] = []
                for try await part in group { all += part }
                return all
            }
        }
        #expect(swapsDone.value == 10)
        #expect(answers.count >= 40)
        #expect(answers.allSatisfy { $0.2 == 200 })
        for (version, ids, _) in answers {
            #expect(!ids.isEmpty)
            #expect(ids.allSatisfy { $0.hasPrefix("v\(version)-") }, "an answer named version \(version) but held \(ids)")
        }
        #expect(Set(answers.map(\.0)) == [1, 2])
    }
}
