import CairnClient
import CairnCore
import CairnDaemon
import CairnIndex
import CairnSearch
import CairnTestSupport
import Foundation
import Testing

@Suite("cairnd and cairn as real processes", .offCooperativePool)
struct EndToEndTests {
    @Test("Given cairnd running on a temp data dir, when cairn queries, reports status, fetches a chunk and curl posts, then each works; SIGTERM exits 0 and removes the socket")
    func cliAgainstDaemon() async throws {
        // Its name promises a curl post: without curl it is skipped, never passed without one.
        try Tools.requireCurl()
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(6)
        let socket = fixture.socketPath
        let daemon = try launch(Products.path("cairnd"), ["--data-dir", fixture.dataDirectory, "--socket", socket],
                                logDirectory: fixture.root)
        defer { if daemon.isRunning { daemon.terminate() } }
        try await waitUntil("cairnd answers /healthz") { await isHealthy(socket) }
        let cairn = Products.path("cairn")

        let query = try await run(cairn, ["--socket", socket, "query", "boil water to drink", "-k", "2", "--json"])
        #expect(query.status == 0, "\(query.stderr)")
        let answer = try JSONDecoder().decode(SearchAnswer.self, from: Data(query.stdout.utf8))
        #expect(answer.version == 6 && answer.results.count == 2 && answer.results.allSatisfy { $0.chunk.id.hasPrefix("v6-") })

        // Words given unquoted are one query, and options may come between them.
        let unquoted = try await run(cairn, ["--socket", socket, "query", "storm", "--mode", "lexical", "maps", "-k", "5", "--json"])
        #expect(unquoted.status == 0, "\(unquoted.stderr)")
        let words = try JSONDecoder().decode(SearchAnswer.self, from: Data(unquoted.stdout.utf8))
        #expect(Set(words.results.map(\.chunk.id)) == ["v6-storm", "v6-maps"], "\(words.results.map(\.chunk.id))")
        let human = try await run(cairn, ["query", "flood maps", "--mode", "lexical", "--scenario", "flood"],
                                  environment: childEnvironment(["CAIRN_SOCKET": socket]))
        #expect(human.status == 0)
        #expect(human.stdout.contains("1. Flood maps") && human.stdout.contains("version 6"))
        #expect(!human.stdout.contains("note:"))
        // A guessed scenario that no chunk has is said, with the ones there are.
        let guessed = try await run(cairn, ["--socket", socket, "query", "flood maps", "--scenario", "Flood"])
        #expect(guessed.status == 0 && guessed.stdout.contains("note: no passage has scenario \"Flood\""), "\(guessed.stdout)")
        #expect(guessed.stdout.contains("scenarios here: ") && guessed.stdout.contains("flood"))

        let status = try await run(cairn, ["status", "--socket", socket])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("version     6"))
        // How old the knowledge is: the installed manifest's created, made by the fixture just now.
        #expect(status.stdout.contains("published   ") && status.stdout.contains(" (0 hours ago)"), "\(status.stdout)")
        let statusJSON = try await run(cairn, ["--socket", socket, "status", "--json"])
        let decoded = try JSONDecoder().decode(DaemonStatus.self, from: Data(statusJSON.stdout.utf8))
        #expect(decoded.version == 6)
        let published = try #require(decoded.sync.published.flatMap(Timestamp.init(rfc3339:)))
        #expect((published.age(at: Date()) ?? -1) >= 0 && (published.age(at: Date()) ?? .infinity) < 3600, "\(published)")

        let chunk = try await run(cairn, ["--socket", socket, "get", "v6-water"])
        #expect(chunk.status == 0 && chunk.stdout.hasPrefix("Boiling water"))
        // Pinned to the version a search answered from: read back only while it serves.
        #expect(try await run(cairn, ["--socket", socket, "get", "v6-water", "--version", "6"]).status == 0)
        let changed = try await run(cairn, ["--socket", socket, "get", "v6-water", "--version", "5"])
        #expect(changed.status == 1 && changed.stderr.contains("version 5 no longer answers (version 6 does)")
                && changed.stderr.contains("(version_changed)"), "\(changed.stderr)")
        let badVersion = try await request(socket, "GET", "/v1/chunks/v6-water?version=latest")
        #expect(badVersion.status == 400 && object(badVersion)["code"] as? String == "bad_version")
        let missing = try await run(cairn, ["--socket", socket, "get", "v6-none"])
        #expect(missing.status == 1 && missing.stderr.contains("chunk_not_found"))
        let empty = try await run(cairn, ["--socket", socket, "query", "   "])
        #expect(empty.status == 1 && empty.stderr.contains("empty_query"))
        let sync = try await run(cairn, ["--socket", socket, "sync"])
        #expect(sync.status == 1 && sync.stderr.contains("sync_unavailable") && sync.stderr.contains("--source URL"))
        // `search` is `query` by the name the socket route and the MCP tool use.
        let search = try await run(cairn, ["--socket", socket, "search", "flood maps", "--mode", "lexical"])
        #expect(search.status == 0 && search.stdout.contains("1. Flood maps"))
        let usage = try await run(cairn, ["--socket", socket, "query", "water", "-k", "0"])
        #expect(usage.status == 2)

        let curl = try await run("/usr/bin/curl", ["-s", "--unix-socket", socket, "http://localhost/v1/search",
                                                   "-d", #"{"query": "flood maps", "k": 1}"#])
        #expect(curl.status == 0)
        let viaCurl = try JSONDecoder().decode(SearchAnswer.self, from: Data(curl.stdout.utf8))
        #expect(viaCurl.results.map(\.chunk.id) == ["v6-maps"])

        // A second cairnd on the same data directory is refused by its lock; on another data
        // directory but the same socket, by the live socket.
        let sameData = try await run(Products.path("cairnd"), ["--data-dir", fixture.dataDirectory, "--socket", socket + "2"])
        #expect(sameData.status == 1 && sameData.stderr.contains("another cairnd is using the data directory"))
        let sameSocket = try await run(Products.path("cairnd"), ["--data-dir", fixture.dataDirectory + "-other", "--socket", socket])
        #expect(sameSocket.status == 1 && sameSocket.stderr.contains("another process"))

        daemon.terminate()  // SIGTERM
        #expect(try await waitForExit(daemon) == 0)
        #expect(!FileManager.default.fileExists(atPath: socket))
        let unreachable = try await run(cairn, ["--socket", socket, "status"])
        #expect(unreachable.status == 3)
    }

    @Test("Given cairnd with no installed version and no source, when cairn queries, then it exits 4 saying no source is configured (not to wait for a sync that never comes) while status still works")
    func noIndexExitCode() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        let socket = fixture.socketPath
        let daemon = try launch(Products.path("cairnd"), ["--data-dir", fixture.dataDirectory, "--socket", socket],
                                logDirectory: fixture.root)
        defer { if daemon.isRunning { daemon.terminate() } }
        try await waitUntil("cairnd answers /healthz") { await isHealthy(socket) }
        let query = try await run(Products.path("cairn"), ["--socket", socket, "query", "water"])
        #expect(query.status == 4 && query.stderr.contains("no_index"))
        #expect(query.stderr.contains("no source to sync from") && !query.stderr.contains("wait for the first sync"), "\(query.stderr)")
        let status = try await run(Products.path("cairn"), ["--socket", socket, "status"])
        #expect(status.status == 0 && status.stdout.contains("none installed, and this cairnd has no source"), "\(status.stdout)")
        daemon.terminate()
        #expect(try await waitForExit(daemon) == 0)
    }
}
