import CairnClient
import CairnCore
import CairnDaemon
import CairnIndex
import CairnSearch
import CairnTestSupport
import Foundation
import Testing

@Suite("Search over the real socket", .offCooperativePool)
struct SearchTests {
    @Test("Given an installed version with its model, when each mode is asked over the socket, then results come from that version with scores and timings",
          arguments: SearchRequest.Mode.allCases)
    func roundTrip(mode: SearchRequest.Mode) async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(3)
        try await withDaemon(fixture) { socket in
            let response = try await request(socket, "POST", "/v1/search",
                                             json: #"{"query": "boil water to drink", "k": 4, "mode": "\#(mode.rawValue)", "min_similarity": -1}"#)
            #expect(response.status == 200)
            #expect(response.headers["content-type"]?.hasPrefix("application/json") == true)
            let answer = try decode(SearchAnswer.self, response)
            #expect(answer.version == 3)
            #expect(answer.stateRoot == (try fixture.serving(3)).stateRoot)
            #expect(answer.denseAvailable)
            #expect(answer.mode == mode || answer.fusion == .lexicalFallback)
            #expect(!answer.results.isEmpty && answer.results.count <= 4)
            #expect(answer.results.allSatisfy { $0.chunk.id.hasPrefix("v3-") })
            #expect(answer.results.map(\.rank) == Array(1...answer.results.count))
            #expect(answer.timings.totalMilliseconds >= answer.timings.embedMilliseconds)
            if mode == .lexical {
                #expect(answer.results.allSatisfy { $0.lexicalScore != nil && $0.denseScore == nil })
                #expect(answer.results.first?.chunk.id == "v3-water")
            }
            if mode == .dense { #expect(answer.results.allSatisfy { $0.denseScore != nil && $0.lexicalScore == nil }) }
            let raw = object(response)
            #expect(raw.keys.contains("online") && raw.keys.contains("stale"))
            let timings = raw["timings"] as? [String: Any] ?? [:]
            #expect(Set(timings.keys) == ["embed_ms", "lexical_ms", "dense_ms", "total_ms"])
        }
    }

    @Test("Given a scenario filter, when searching, then only that scenario's and general chunks come back")
    func scenarioFilter() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(1)
        try await withDaemon(fixture) { socket in
            let response = try await request(socket, "POST", "/v1/search",
                                             json: #"{"query": "drink flood storm boiling", "k": 10, "mode": "lexical", "filter": {"scenario": "storm"}}"#)
            let answer = try decode(SearchAnswer.self, response)
            #expect(Set(answer.results.map(\.chunk.scenario)) == ["storm", "general"])
            let tagged = try decode(SearchAnswer.self, try await request(
                socket, "POST", "/v1/search", json: #"{"query": "safe water", "k": 10, "mode": "lexical", "filter": {"tags": ["water"]}}"#))
            #expect(!tagged.results.isEmpty)
            #expect(tagged.results.allSatisfy { $0.chunk.tags.contains("water") })
        }
    }

    @Test("Given a version without a model, when searching in hybrid mode, then the answer is lexical and says dense_available false")
    func lexicalOnly() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(2, withModel: false)
        try await withDaemon(fixture) { socket in
            let response = try await request(socket, "POST", "/v1/search", json: #"{"query": "flood maps"}"#)
            #expect(response.status == 200)
            #expect(object(response)["dense_available"] as? Bool == false)
            let answer = try decode(SearchAnswer.self, response)
            #expect(answer.mode == .lexical)
            #expect(answer.results.first?.chunk.id == "v2-maps")
            let status = try decode(DaemonStatus.self, try await request(socket, "GET", "/v1/status"))
            #expect(status.lexicalOnly && !status.modelLoaded)
        }
    }

    @Test("Given no installed version, when searching, then 503 no_index, while health and status still answer")
    func noIndex() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try await withDaemon(fixture) { socket in
            let response = try await request(socket, "POST", "/v1/search", json: #"{"query": "water"}"#)
            #expect(response.status == 503)
            #expect(object(response)["code"] as? String == "no_index")
            #expect(try await request(socket, "GET", "/v1/chunks/v1-water").status == 503)
            let status = try await request(socket, "GET", "/v1/status")
            #expect(status.status == 200)
            #expect(object(status)["installed"] as? Bool == false)
            #expect(object(status)["version"] is NSNull)
        }
    }

    @Test("Given an installed version, when fetching chunks by id, then known ids answer with their version and unknown ids get 404 chunk_not_found")
    func chunks() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(4)
        try await withDaemon(fixture) { socket in
            let found = try await request(socket, "GET", "/v1/chunks/v4-water")
            #expect(found.status == 200)
            let answer = try decode(ChunkAnswer.self, found)
            #expect(answer.chunk == DataDirectoryFixture.chunks(version: 4)[0])
            #expect(answer.version == 4)
            let missing = try await request(socket, "GET", "/v1/chunks/v4-nothing%20here")
            #expect(missing.status == 404)
            #expect(object(missing)["code"] as? String == "chunk_not_found")
        }
    }
}
