// cairn-bench sync-time --socket PATH --version N --chunk ID [--data-dir DIR] [--interval-ms 2]
//
// How long a sync takes as a client sees it, with no other load: sends `POST /v1/sync`, then
// asks `GET /v1/chunks/ID` (one row read by id: the cheapest request that names the version
// being served) every `--interval-ms` until the answer comes from version N. With --data-dir,
// the polling costs next to nothing while the install runs: it first waits, reading the
// `DIR/current` link every millisecond (one readlink call, no request to cairnd), until the
// link names version N, and only then asks back to back. Prints {sync_ms (request → first
// answer from version N), polls, interval_ms, poll_ms (median time of one poll request),
// resolution_ms (interval + that: how late the switch can be seen at most)}.
import CairnClient
import Foundation

func syncTime(_ arguments: [String]) throws {
    let client = UnixHTTPClient(socketPath: try requiredOption("--socket", in: arguments), timeout: 60)
    let target = try intOption("--version", in: arguments, default: 1)
    let chunk = try requiredOption("--chunk", in: arguments)
    let interval = try intOption("--interval-ms", in: arguments, default: 2)
    let path = "/v1/chunks/" + (chunk.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? chunk)
    let clock = ContinuousClock()
    func servedVersion() -> Int? {
        guard let response = try? client.send(method: "GET", path: path), response.status == 200,
              let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] else { return nil }
        return object["version"] as? Int
    }
    guard let before = servedVersion(), before < target else {
        throw Failure(description: "cairnd does not serve chunk \(chunk) from a version below \(target)")
    }
    let requested = clock.now
    let sync = try client.send(method: "POST", path: "/v1/sync", body: [])
    guard sync.status == 202 else { throw Failure(description: "POST /v1/sync answered \(sync.status)") }
    var pollTimes: [Double] = []
    var pause = interval
    if let directory = option("--data-dir", in: arguments) {
        let link = directory + "/current"
        func current() -> String {
            var buffer = [CChar](repeating: 0, count: 4096)
            let count = readlink(link, &buffer, buffer.count - 1)
            return count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        }
        while current() != "versions/\(target)" {
            guard clock.now - requested < .seconds(600) else { throw Failure(description: "version \(target) was never installed") }
            Thread.sleep(forTimeInterval: 0.001)
        }
        pause = 0
    }
    while true {
        let start = clock.now
        let version = servedVersion()
        let end = clock.now
        pollTimes.append(milliseconds(end - start))
        if version == target {
            let sorted = pollTimes.sorted()
            try printJSON([
                "sync_ms": milliseconds(end - requested), "polls": pollTimes.count,
                "interval_ms": pause, "poll_ms": percentile(sorted, 0.5),
                "resolution_ms": Double(pause) + percentile(sorted, 0.5),
            ])
            return
        }
        guard end - requested < .seconds(600) else { throw Failure(description: "version \(target) never answered") }
        // Sleeping between polls keeps their cost off the install's cores.
        if pause > 0 { Thread.sleep(forTimeInterval: Double(pause) / 1000) }
    }
}
