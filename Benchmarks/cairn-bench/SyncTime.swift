// cairn-bench sync-time --socket PATH --version N --chunk ID [--interval-ms 2]
//
// How long a sync takes as a client sees it, with no other load: sends `POST /v1/sync`, then
// asks `GET /v1/chunks/ID` (one row read by id: the cheapest request that names the version
// being served) every `--interval-ms` until the answer comes from version N. Prints {sync_ms
// (request → first answer from version N), polls, interval_ms, poll_ms (median time of one
// poll request), resolution_ms (interval + that: how late the switch can be seen at most)}.
import CairnDaemon
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
    while true {
        let start = clock.now
        let version = servedVersion()
        let end = clock.now
        pollTimes.append(milliseconds(end - start))
        if version == target {
            let sorted = pollTimes.sorted()
            try printJSON([
                "sync_ms": milliseconds(end - requested), "polls": pollTimes.count,
                "interval_ms": interval, "poll_ms": percentile(sorted, 0.5),
                "resolution_ms": Double(interval) + percentile(sorted, 0.5),
            ])
            return
        }
        guard end - requested < .seconds(600) else { throw Failure(description: "version \(target) never answered") }
        // Sleeping between polls keeps their cost off the install's cores.
        Thread.sleep(forTimeInterval: Double(interval) / 1000)
    }
}
