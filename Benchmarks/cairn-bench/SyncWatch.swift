// cairn-bench sync-watch --socket PATH --version N [--query TEXT] [--mode M] [--after 50]
// cairn-bench inflate-hash --blob FILE --size N [--file PATH]
//
// sync-watch: what a client sees while cairnd installs a version. One client queries over the
// real socket back to back (one connection per request, as `cairn` does); after 20 warm-up
// queries it sends `POST /v1/sync` and keeps querying until answers come from version N,
// then `--after` more. Prints {sync_ms (sync request → first answer from version N), queries,
// errors, median_ms and p99_ms (all answered queries), max_during_ms, p90_during_ms and
// p99_during_ms (queries that started during the install), during, max_swap_ms and swap (the
// queries that started from 10 ms before to 50 ms after the first answer from version N: those in
// flight while cairnd fsynced, renamed, swapped the links and handed the new index over — 2–10 ms
// in its install timings under this load — and the first ones the new index answered)}.
//
// inflate-hash: the floor an install cannot beat: SHA-256 of the compressed blob and zlib
// inflation of it into memory, with the same CairnStore and CairnCore code cairnd uses; the
// median (inflate_hash_ms) and best of 5 runs. With --file PATH, also the median of the same
// inflating into a new file there, as an install does (inflate_file_ms; not fsynced).
import CairnCore
import CairnClient
import CairnStore
import Foundation

func syncWatch(_ arguments: [String]) throws {
    let client = UnixHTTPClient(socketPath: try requiredOption("--socket", in: arguments), timeout: 60)
    let target = try intOption("--version", in: arguments, default: 1)
    let after = try intOption("--after", in: arguments, default: 50)
    let body = Array(try JSONSerialization.data(withJSONObject: [
        "query": option("--query", in: arguments) ?? "vitamin d and breast cancer risk", "k": 10,
        "mode": option("--mode", in: arguments) ?? "hybrid",
    ]))
    let clock = ContinuousClock()
    struct Sample { var start: ContinuousClock.Instant; var ms: Double; var version: Int? }
    func ask() -> Sample {
        let start = clock.now
        let response = try? client.send(method: "POST", path: "/v1/search", body: body)
        let ms = milliseconds(clock.now - start)
        guard let response, response.status == 200,
              let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] else {
            return Sample(start: start, ms: ms, version: nil)
        }
        return Sample(start: start, ms: ms, version: object["version"] as? Int)
    }
    var samples: [Sample] = (0..<20).map { _ in ask() }
    let requested = clock.now
    let sync = try client.send(method: "POST", path: "/v1/sync", body: [])
    guard sync.status == 202 else { throw Failure(description: "POST /v1/sync answered \(sync.status)") }
    var switched: ContinuousClock.Instant?
    var extra = 0
    while extra < after {
        let sample = ask()
        samples.append(sample)
        if switched == nil, sample.version == target { switched = clock.now }
        if switched != nil { extra += 1 }
        guard clock.now - requested < .seconds(1800) else { throw Failure(description: "version \(target) never answered") }
    }
    let ok = samples.filter { $0.version != nil }
    let during = samples.filter { $0.start >= requested && $0.start <= switched! }
    let all = ok.map(\.ms).sorted()
    let duringSorted = during.map(\.ms).sorted()
    let firstNew = samples.first { $0.version == target }!.start
    let swap = samples.filter { $0.start >= firstNew - .milliseconds(10) && $0.start <= firstNew + .milliseconds(50) }
    try printJSON([
        "sync_ms": milliseconds(switched! - requested), "queries": samples.count,
        "errors": samples.count - ok.count, "median_ms": percentile(all, 0.5), "p99_ms": percentile(all, 0.99),
        "max_during_ms": duringSorted.last ?? .nan, "p90_during_ms": percentile(duringSorted, 0.9),
        "p99_during_ms": percentile(duringSorted, 0.99), "during": during.count,
        "max_swap_ms": swap.map(\.ms).max() ?? .nan, "swap": swap.count,
    ])
}

func inflateHash(_ arguments: [String]) throws {
    let path = try requiredOption("--blob", in: arguments)
    let size = try intOption("--size", in: arguments, default: 1)
    let clock = ContinuousClock()
    func median(_ body: () throws -> Void) throws -> (median: Double, best: Double) {
        var times: [Double] = []
        for _ in 0..<5 {
            let start = clock.now
            try body()
            times.append(milliseconds(clock.now - start))
        }
        times.sort()
        return (percentile(times, 0.5), times[0])
    }
    let memory = try median {
        let blob = try FileSystem.read(path)
        _ = ContentID(hashing: blob)
        var produced = 0
        try Zlib.decompress(blob, limit: size) { produced += $0.count }
        guard produced == size else { throw Failure(description: "the blob inflates to \(produced) bytes, not \(size)") }
    }
    var result: [String: Any] = ["inflate_hash_ms": memory.median, "best_ms": memory.best]
    if let file = option("--file", in: arguments) {
        // The same into a new file, as an install writes it (written out and its writeback
        // started, not fsynced); the previous run's file is removed before the clock starts.
        var times: [Double] = []
        for _ in 0..<5 {
            unlink(file)
            let start = clock.now
            let blob = try FileSystem.read(path)
            _ = ContentID(hashing: blob)
            try Zlib.decompress(blob, toNewFile: file, size: size, durable: false)
            times.append(milliseconds(clock.now - start))
        }
        unlink(file)
        result["inflate_file_ms"] = percentile(times.sorted(), 0.5)
    }
    try printJSON(result)
}
