import CairnSearch
import CairnClient
import CairnTestSupport
import CairnDaemon
import Foundation
import Testing

@Suite("Status and sync endpoints", .offCooperativePool)
struct StatusTests {
    @Test("Given a version and a state.json, when asking for status, then it reports version, model, sync fields and disk use")
    func statusFields() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(5)
        // CairnSync's state.json: the last attempt reached no source, version 6 was seen.
        let state = #"{"last_attempt": "2024-05-01T10:00:00Z", "last_success": "2024-05-01T09:00:00Z", "last_attempt_reached_source": false, "last_error": {"code": "network", "message": "all sources failed", "at": "2024-05-01T10:00:00Z"}, "highest_version_seen": 6, "sources": [{"url": "https://a.example/repo", "consecutive_failures": 2, "last_error": "timeout"}], "something_else": 1}"#
        try Data(state.utf8).write(to: URL(fileURLWithPath: fixture.dataDirectory + "/state.json"))
        try await withDaemon(fixture) { socket in
            let response = try await request(socket, "GET", "/v1/status")
            #expect(response.status == 200)
            let status = try decode(DaemonStatus.self, response)
            #expect(status.installed && status.version == 5 && status.chunkCount == 5)
            #expect(status.stateRoot == (try fixture.serving(5)).stateRoot)
            #expect(status.modelLoaded && !status.lexicalOnly && status.dimension == TinyModel.dimension)
            #expect(status.denseSearch == "flat")
            #expect(status.sync.lastAttempt == "2024-05-01T10:00:00Z" && status.sync.lastError == "all sources failed")
            #expect(status.sync.online == false && status.sync.stale == true && status.sync.highestVersionSeen == 6)
            #expect(status.sync.sources == [DaemonStatus.Sync.Source(url: "https://a.example/repo", healthy: false, lastError: "timeout",
                                                                            failuresInARow: 2)])
            #expect(status.dataDirectoryBytes > 0)
            #expect(!status.syncAvailable)
            let search = try await request(socket, "POST", "/v1/search", json: #"{"query": "water"}"#)
            #expect(object(search)["online"] as? Bool == false)
            #expect(object(search)["stale"] as? Bool == true)
        }
    }

    @Test("Given approximate_dense_above = 0, when asking for status and searching densely, then status says narrowed and the search answers with exact cosines")
    func narrowedDenseSearch() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(1)
        let flat = try await withDaemon(fixture) { socket in
            try await request(socket, "POST", "/v1/search", json: #"{"query": "boil water", "mode": "dense", "k": 3}"#)
        }
        try await withDaemon(fixture, configure: { $0.ranking.approximateDenseAbove = 0 }) { socket in
            #expect(try decode(DaemonStatus.self, try await request(socket, "GET", "/v1/status")).denseSearch == "narrowed")
            let narrowed = try await request(socket, "POST", "/v1/search", json: #"{"query": "boil water", "mode": "dense", "k": 3}"#)
            #expect(narrowed.status == 200)
            let results = { (response: UnixHTTPClient.Response) in
                (object(response)["results"] as? [[String: Any]] ?? []).map { "\(($0["chunk"] as? [String: Any])?["id"] ?? "")@\($0["dense_score"] ?? "")" }
            }
            #expect(!results(narrowed).isEmpty && results(narrowed) == results(flat))
        }
    }

    @Test("Given no sync component, when POST /v1/sync, then 503 sync_unavailable; given one, then 202 and the hook runs")
    func syncTrigger() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try await withDaemon(fixture) { socket in
            let response = try await request(socket, "POST", "/v1/sync")
            #expect(response.status == 503)
            #expect(object(response)["code"] as? String == "sync_unavailable")
        }
        // A stand-in for the sync side: this checks the API's two answers. A real attempt asked
        // for by POST /v1/sync is followed by ProgressTests (cairnd syncing from the fault server).
        let calls = Counter()
        let hooks = DaemonHooks(requestSync: {
            calls.increment()
            return ["field": 7]
        })
        try await withDaemon(fixture, hooks: hooks) { socket in
            let response = try await request(socket, "POST", "/v1/sync")
            #expect(response.status == 202)
            #expect(object(response)["accepted"] as? Bool == true)
            #expect(object(response)["attempts"] as? [String: Int] == ["field": 7])
            #expect(calls.value == 1)
            #expect(object(try await request(socket, "GET", "/v1/status"))["sync_available"] as? Bool == true)
        }
    }
}

import Synchronization

final class Counter: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
