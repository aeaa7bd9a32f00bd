// cairn-bench query-load --socket PATH --queries FILE --mode M --clients C --count N [--per-query FILE]
//
// End-to-end search latency over cairnd's real Unix socket: C client threads, each sending
// its share of N `POST /v1/search` requests (k = 10) back to back, one connection per request
// (`Connection: close`, exactly as the `cairn` CLI talks to the daemon). The latency of a
// request runs from before connect to the last byte of the answer, so it includes the query
// embedding, the search, JSON and the connection set-up. Ten unmeasured warm-up requests run
// first. Prints {p50_ms, p99_ms, mean_ms, qps, errors, …}; `server_*` are the daemon's own
// `timings` (after the body was read), for seeing where the time goes: their p50 and p99 each
// over all requests (so a p99 outside the server's shows time spent outside its search).
// `--per-query FILE` writes one JSON line per request: the query, its latency and the server's
// timings, in the order sent.
import CairnClient
import Foundation
import Synchronization

func queryLoad(_ arguments: [String]) throws {
    let client = UnixHTTPClient(socketPath: try requiredOption("--socket", in: arguments), timeout: 30)
    let queries = try Corpus.queries(try requiredOption("--queries", in: arguments))
    let mode = option("--mode", in: arguments) ?? "hybrid"
    let clients = try intOption("--clients", in: arguments, default: 1)
    let count = try intOption("--count", in: arguments, default: 200)
    let perQuery = option("--per-query", in: arguments)
    guard !queries.isEmpty else { throw Failure(description: "no queries") }
    let bodies = try queries.map { try JSONSerialization.data(withJSONObject: ["query": $0, "k": 10, "mode": mode]) }.map(Array.init)

    for body in bodies.prefix(10) { _ = try? client.send(method: "POST", path: "/v1/search", body: body) }

    let samples = Mutex<[Sample]>([])
    let clock = ContinuousClock()
    let start = clock.now
    let finished = DispatchGroup()
    for worker in 0..<clients {
        finished.enter()
        // A thread per client (not a task): UnixHTTPClient blocks its thread, and Dispatch's
        // pools would cap the clients at the core count.
        Thread.detachNewThread {
            var mine: [Sample] = []
            for request in stride(from: worker, to: count, by: clients) {
                var sample = Sample.measure(client: client, body: bodies[request % bodies.count], clock: clock)
                sample.request = request
                mine.append(sample)
            }
            samples.withLock { $0 += mine }
            finished.leave()
        }
    }
    finished.wait()
    let wall = milliseconds(clock.now - start) / 1e3

    let all = samples.withLock { $0 }
    let good = all.filter { $0.ok }
    let latencies = good.map(\.milliseconds).sorted()
    var summary: [String: Any] = [
        "mode": mode, "clients": clients, "requests": all.count, "errors": all.count - good.count,
        "p50_ms": percentile(latencies, 0.5), "p99_ms": percentile(latencies, 0.99),
        "mean_ms": latencies.isEmpty ? Double.nan : latencies.reduce(0, +) / Double(latencies.count),
        "qps": Double(good.count) / wall,
    ]
    for (name, timing) in Sample.serverTimings {
        let sorted = good.compactMap { $0[keyPath: timing] }.sorted()
        summary["server_\(name)_p50_ms"] = percentile(sorted, 0.5)
        summary["server_\(name)_p99_ms"] = percentile(sorted, 0.99)
    }
    try printJSON(summary)
    if let perQuery {
        let lines = try all.sorted { $0.request < $1.request }.map { sample in
            var line: [String: Any] = ["query": queries[sample.request % queries.count], "ok": sample.ok, "ms": sample.milliseconds]
            for (name, timing) in Sample.serverTimings { if let value = sample[keyPath: timing] { line["server_\(name)_ms"] = value } }
            return String(decoding: try JSONSerialization.data(withJSONObject: line, options: [.sortedKeys]), as: UTF8.self)
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: perQuery, atomically: true, encoding: .utf8)
    }
}

/// One request's outcome.
private struct Sample: Sendable {
    var request = 0
    var ok = false
    var milliseconds = 0.0
    var serverTotal: Double?
    var serverEmbed: Double?
    var serverDense: Double?
    var serverLexical: Double?

    /// The server's timings, by the name the output gives them.
    static var serverTimings: [(String, KeyPath<Sample, Double?>)] { [
        ("total", \.serverTotal), ("embed", \.serverEmbed), ("dense", \.serverDense), ("lexical", \.serverLexical),
    ] }

    static func measure(client: UnixHTTPClient, body: [UInt8], clock: ContinuousClock) -> Sample {
        var sample = Sample()
        let start = clock.now
        let response = try? client.send(method: "POST", path: "/v1/search", body: body)
        sample.milliseconds = cairn_bench.milliseconds(clock.now - start)
        guard let response, response.status == 200 else { return sample }
        sample.ok = true
        if let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any],
           let timings = object["timings"] as? [String: Any] {
            sample.serverTotal = timings["total_ms"] as? Double
            sample.serverEmbed = timings["embed_ms"] as? Double
            sample.serverDense = timings["dense_ms"] as? Double
            sample.serverLexical = timings["lexical_ms"] as? Double
        }
        return sample
    }
}
