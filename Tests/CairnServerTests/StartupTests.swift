import CairnServer
import Foundation
import Logging
import Testing

@Suite("Start-up and configuration")
struct StartupTests {
    static let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    @Test("Given a private key file somewhere under the root, when the server is built, then it refuses", arguments: [
        "publisher.key", "channels/stable/.hidden-key", "blobs/sha256/ab/key.txt",
    ])
    func privateKey(relative: String) throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        try repo.write("repo/" + relative, Array("cairn-ed25519-private-v1 AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=\n".utf8))
        #expect {
            _ = try buildServer(configuration: ServerConfiguration(repository: repo.root.path), logger: Self.logger)
        } throws: { ($0 as? ServerError)?.code == .privateKeyUnderRoot }
    }

    @Test("Given a missing repository folder, when the server is built, then it refuses with repository_invalid")
    func missingRoot() {
        #expect {
            _ = try buildServer(configuration: ServerConfiguration(repository: "/nonexistent/cairn-repo"), logger: Self.logger)
        } throws: { ($0 as? ServerError)?.code == .repositoryInvalid }
    }

    @Test("Given a config file and environment, when applied in order, then later sources win and comments are ignored")
    func layering() throws {
        var configuration = ServerConfiguration()
        try configuration.apply(configFile: """
            # comment
            host = 0.0.0.0
            port = 9000   # trailing comment
            repo = /srv/repo
            log_level = debug
            idle_timeout_seconds = 5
            max_connections = 10
            online_search = true
            search_cache = /var/cache/cairn-search
            search_trusted_key = /etc/cairn/a.pub
            search_trusted_key = /etc/cairn/b.pub
            max_concurrent_searches = 3
            max_queued_searches = 0
            """)
        #expect(configuration.onlineSearch)
        #expect(configuration.searchCache == "/var/cache/cairn-search")
        #expect(configuration.searchTrustedKeys == ["/etc/cairn/a.pub", "/etc/cairn/b.pub"])
        #expect(configuration.maxConcurrentSearches == 3 && configuration.maxQueuedSearches == 0)
        #expect(configuration.host == "0.0.0.0")
        #expect(configuration.port == 9000)
        #expect(configuration.logLevel == .debug)
        #expect(configuration.idleTimeoutSeconds == 5)
        #expect(configuration.maxConnections == 10)
        try configuration.apply(environment: ["CAIRN_SERVER_PORT": "9100", "CAIRN_SERVER_REPO": "/data/repo",
                                              "CAIRN_SERVER_ONLINE_SEARCH": "false"])
        #expect(!configuration.onlineSearch)
        #expect(configuration.port == 9100)
        #expect(configuration.repository == "/data/repo")
        #expect(configuration.host == "0.0.0.0")
        // A list from the environment replaces the file's: a key or an origin dropped there
        // does not stay.
        try configuration.apply(configFile: "search_allow_origin = https://old.example")
        try configuration.apply(environment: ["CAIRN_SERVER_SEARCH_TRUSTED_KEY": "/etc/cairn/new.pub",
                                              "CAIRN_SERVER_SEARCH_ALLOW_ORIGIN": "https://new.example"])
        #expect(configuration.searchTrustedKeys == ["/etc/cairn/new.pub"])
        #expect(configuration.searchAllowOrigins == ["https://new.example"])
        try configuration.check()
        // A pinned root and pinned keys: one or the other.
        try configuration.apply(environment: ["CAIRN_SERVER_SEARCH_TRUSTED_ROOT": "/etc/cairn/1.root.json"])
        #expect(throws: ServerError.self) { try configuration.check() }
    }

    @Test("Given bad config lines, when applied, then each is refused naming its line", arguments: [
        "port = 70000", "colour = blue", "just words", "log_level = loud", "max_connections = 0",
        "online_search = maybe", "max_concurrent_searches = 0", "search_cache =",
        // A queue the pool's arithmetic overflowed on.
        "max_queued_searches = 9223372036854775807",
    ])
    func badConfig(line: String) {
        var configuration = ServerConfiguration()
        #expect {
            try configuration.apply(configFile: "# first\n" + line)
        } throws: { error in
            guard let error = error as? ServerError else { return false }
            return error.code == .configurationInvalid && error.message.hasPrefix("line 2")
        }
    }

    @Test("Given a config file saved with CRLF line ends and a byte-order mark, when applied, then it is read line by line: a leading comment does not swallow it, a bad line is named")
    func windowsLineEnds() throws {
        var configuration = ServerConfiguration()
        try configuration.apply(configFile: "\u{FEFF}# cairn-server\r\nrepo = /data/repo\r\nport = 8123\r\n")
        #expect(configuration.repository == "/data/repo" && configuration.port == 8123)
        #expect {
            var configuration = ServerConfiguration()
            try configuration.apply(configFile: "# cairn-server\r\ncolour = blue\r\n")
        } throws: { error in
            (error as? ServerError)?.code == .configurationInvalid && (error as? ServerError)?.message.hasPrefix("line 2") == true
        }
    }

    @Test("Given max_concurrent_searches set and max_queued_searches not, then the queue is 4 x the concurrency set")
    func queueFollowsConcurrency() throws {
        var configuration = ServerConfiguration()
        try configuration.apply(configFile: "max_concurrent_searches = 3\n")
        #expect(configuration.maxQueuedSearches == 12)
        try configuration.apply(configFile: "max_queued_searches = 0\n")
        #expect(configuration.maxQueuedSearches == 0)
    }

    @Test("Given search_allow_origin values, then an origin (scheme and host) or * is taken, lowercased, and a path, a bare host or another scheme is refused naming the line")
    func allowOrigins() throws {
        var configuration = ServerConfiguration()
        try configuration.apply(configFile: "search_allow_origin = https://App.Example\nsearch_allow_origin = http://10.0.0.2:8080\n")
        #expect(configuration.searchAllowOrigins == ["https://app.example", "http://10.0.0.2:8080"])
        for bad in ["https://app.example/", "app.example", "ftp://app.example", "https://"] {
            #expect {
                var other = ServerConfiguration()
                try other.apply(configFile: "search_allow_origin = \(bad)\n")
            } throws: { error in
                (error as? ServerError)?.code == .configurationInvalid && (error as? ServerError)?.message.hasPrefix("line 1") == true
            }
        }
    }

    @Test("The example config file in server-config parses and holds the documented defaults")
    func exampleFile() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("server-config/cairn-server.conf")
        var configuration = ServerConfiguration()
        try configuration.apply(configFile: String(contentsOf: file, encoding: .utf8))
        #expect(configuration == ServerConfiguration())
    }
}
