import CairnClient
import CairnCore
import CairnIndex
import CairnSearch
import Foundation

/// Sends every (query, mode) search to cairnd over its socket, `concurrency` at a time, each on
/// its own thread (the socket client blocks), and collects the ranked chunk ids.
struct QueryRunner {
    struct Outcome: Sendable {
        var ranking: [String]
        /// How the daemon ranked: `weighted`, `rrf`, `lexical_fallback` or `none`.
        var fusion: String
    }

    var socketPath: String
    var k = 100
    var concurrency = 4

    /// Outcomes in the order of `jobs`.
    func run(_ jobs: [(query: TestCollection.Query, mode: SearchRequest.Mode)]) async throws(EvalFailure) -> [Outcome] {
        let results = ResultBox(count: jobs.count)
        let client = UnixHTTPClient(socketPath: socketPath, timeout: 120)
        let k = self.k
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let group = DispatchGroup()
            for _ in 0..<max(1, concurrency) {
                group.enter()
                // Plain threads, not tasks: the socket client blocks, and blocking calls would
                // starve the cooperative pool (one thread per core). All are joined by `group`.
                Thread.detachNewThread {
                    while let index = results.next() {
                        results.set(index, Self.search(client, jobs[index].query.text, mode: jobs[index].mode, k: k))
                    }
                    group.leave()
                }
            }
            group.notify(queue: .global()) { done.resume() }
        }
        var outcomes: [Outcome] = []
        for (index, result) in results.all().enumerated() {
            switch result {
            case .success(let outcome): outcomes.append(outcome)
            case .failure(let error):
                throw .daemon("query \(jobs[index].query.id) in mode \(jobs[index].mode.rawValue): \(error.message)")
            }
        }
        return outcomes
    }

    private static func search(_ client: UnixHTTPClient, _ text: String, mode: SearchRequest.Mode, k: Int) -> Result<Outcome, EvalFailure> {
        let body: [String: Any] = ["query": text, "k": k, "mode": mode.rawValue]
        guard let bytes = try? JSONSerialization.data(withJSONObject: body) else { return .failure(.badInput("a query is not encodable")) }
        do {
            let response = try client.send(method: "POST", path: "/v1/search", body: Array(bytes))
            guard response.status == 200 else {
                let problem = try? JSONDecoder().decode([String: String].self, from: Data(response.body))
                return .failure(.daemon("cairnd answered \(response.status) \(problem?["code"] ?? "")"))
            }
            let answer = try JSONDecoder().decode(SearchAnswer.self, from: Data(response.body))
            return .success(Outcome(ranking: answer.results.map(\.chunk.id), fusion: answer.fusion.rawValue))
        } catch let error as ClientError {
            return .failure(.daemon(error.message))
        } catch {
            return .failure(.daemon("cairnd's answer is not the expected JSON"))
        }
    }
}

/// The jobs' shared cursor and result slots.
// @unchecked Sendable: every access to `cursor` and `slots` holds `lock`.
private final class ResultBox: @unchecked Sendable {
    private let lock = NSLock()
    private var cursor = 0
    private var slots: [Result<QueryRunner.Outcome, EvalFailure>?]

    init(count: Int) { slots = Array(repeating: nil, count: count) }

    func next() -> Int? {
        lock.withLock {
            guard cursor < slots.count else { return nil }
            defer { cursor += 1 }
            return cursor
        }
    }

    func set(_ index: Int, _ result: Result<QueryRunner.Outcome, EvalFailure>) { lock.withLock { slots[index] = result } }

    func all() -> [Result<QueryRunner.Outcome, EvalFailure>] { lock.withLock { slots.map { $0! } } }
}
