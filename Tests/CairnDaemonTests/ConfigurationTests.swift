@testable import CairnDaemon
import CairnClient
import CairnCore
import CairnIndex
import Foundation
import Logging
import Testing

@Suite("Configuration: file, environment, defaults")
struct ConfigurationTests {
    @Test("Given the example client-config/cairnd.conf, when parsed, then every key applies and repeatable keys accumulate")
    func exampleFile() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("client-config/cairnd.conf").path
        var configuration = DaemonConfiguration()
        try configuration.apply(file: path)
        #expect(configuration.sources == ["https://kb.example.org/repo", "file:///media/usb/repo"])
        #expect(configuration.trustedKeys == ["/etc/cairn/publisher.pub"])
        #expect(configuration.socketPath == DaemonConfiguration.defaultSocketPath)
        // The README says this file documents every key: each appears as a `key =` line (most
        // commented out, with their defaults), and so does a [channel NAME] section.
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let lines = text.split(separator: "\n").map { $0.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces) }
        for key in CairndConfigFile.knownKeys.sorted() {
            #expect(lines.contains { $0.hasPrefix(key + " =") }, "client-config/cairnd.conf does not document \(key)")
        }
        #expect(lines.contains { $0.hasPrefix("[channel ") } && lines.contains { $0.hasPrefix("[source ") })
    }

    @Test("Given every key with a value, when parsed, then each field takes it")
    func everyKey() throws {
        let text = """
            # comment
            source = "https://a.example/repo"
            channel = beta   # trailing comment
            trusted_key = /k.pub
            data_dir = /data
            socket = /s.sock
            poll_interval = 12.5
            socket_mode = 0640
            socket_group = cairn
            log_level = debug
            max_concurrent_queries = 3
            max_queued_queries = 0
            max_body_bytes = 1024
            max_connections = 9
            idle_timeout = 4
            backoff_min = 5
            backoff_max = 60
            bandwidth_cap = 250000
            approximate_dense_above = 0
            dense_shortlist = 0.05
            spare_index_min_bytes = 1G
            direct_install_min_bytes = 16M
            """
        var c = DaemonConfiguration()
        #expect(c.ranking.approximateDenseAbove == 50_000 && c.ranking.shortlistFraction == 0.03)
        try c.apply(DaemonConfiguration.parse(text))
        #expect(c.sources == ["https://a.example/repo"] && c.channel == "beta" && c.trustedKeys == ["/k.pub"])
        #expect(c.dataDirectory == "/data" && c.socketPath == "/s.sock" && c.pollInterval == 12.5)
        #expect(c.socketMode == 0o640 && c.socketGroup == "cairn" && c.logLevel == .debug)
        #expect(c.maxConcurrentQueries == 3 && c.maxQueuedQueries == 0 && c.maxBodyBytes == 1024)
        #expect(c.maxConnections == 9 && c.idleTimeout == 4)
        #expect(c.backoffMinimum == 5 && c.backoffMaximum == 60 && c.bandwidthCap == 250_000)
        #expect(c.ranking.approximateDenseAbove == 0 && c.ranking.shortlistFraction == 0.05)
        #expect(c.spareIndexMinimumBytes == 1 << 30 && c.directInstallMinimumBytes == 16 << 20)
        try c.apply(DaemonConfiguration.parse("approximate_dense_above = never\nspare_index_min_bytes = never\ndirect_install_min_bytes = never"))
        #expect(c.ranking.approximateDenseAbove == .max && c.spareIndexMinimumBytes == nil && c.directInstallMinimumBytes == nil)
        try c.apply(DaemonConfiguration.parse("spare_index_min_bytes = 0\ndirect_install_min_bytes = 0"))
        #expect(c.spareIndexMinimumBytes == 0 && c.directInstallMinimumBytes == 0)
        // A body is parsed by a reader that takes at most 1 MiB: a larger setting (valid before
        // 2026-12-06) counts as 1 MiB, and does not stop the device from starting.
        try c.apply(DaemonConfiguration.parse("max_body_bytes = 4000000"))
        #expect(c.maxBodyBytes == 1 << 20)
        try c.apply(DaemonConfiguration.parse("slow_source_rate = 0\nslow_source_window = 30"))
        #expect(c.slowSourceRate == 0 && c.slowSourceWindow == 30)
        try c.apply(DaemonConfiguration.parse("stop_timeout = 12.5"))
        #expect(c.stopTimeout == 12.5)
        #expect(c.syncRequestInterval == 10)
        try c.apply(DaemonConfiguration.parse("sync_request_interval = 0"))
        #expect(c.syncRequestInterval == 0)
        try c.apply(DaemonConfiguration.parse("sync_request_interval = 2.5"))
        #expect(c.syncRequestInterval == 2.5)
        #expect(c.operatorGroup == nil)
        try c.apply(DaemonConfiguration.parse("operator_group = cairn-admin"))
        #expect(c.operatorGroup == "cairn-admin")
        try c.apply(DaemonConfiguration.parse("operator_group ="))
        #expect(c.operatorGroup == nil)
    }

    @Test("Given keys this build does not know (a newer cairnd's settings), when applied, then each is skipped and listed with its line, and the rest applies; refused: a typo of a known key (a letter or two off, another case, - for _) naming that one, an unknown key about trust or access, one in a [source] or [channel] section, and an empty key")
    func unknownKeysSkipped() throws {
        var c = DaemonConfiguration()
        try c.apply(DaemonConfiguration.parse("""
            poll_interval = 60
            colour = blue
            log_colour = green
            [channel tools]
            source = https://kb.example.org/tools
            """))
        #expect(c.pollInterval == 60 && c.extraChannels.map(\.name) == ["tools"])
        #expect(c.ignoredKeys == ["config line 2: colour", "config line 3: log_colour"])
        for (line, meant) in [("max_disk_byte = 2G", "max_disk_bytes"), ("log_lvel = debug", "log_level"), ("sorce = https://a", "source"),
                              ("TRUSTED_ROOT = /etc/cairn/1.root.json", "trusted_root"), ("poll-interval = 5", "poll_interval")] {
            #expect {
                var c = DaemonConfiguration()
                try c.apply(DaemonConfiguration.parse(line))
            } throws: { error in
                (error as? DaemonError)?.message.hasSuffix("did you mean \(meant)?") == true
            }
        }
        // Unknown, and about trust or access, or in a [source] or [channel] section: refused.
        for text in ["trusted_root_file = /etc/cairn/1.root.json", "ca_file = /etc/cairn/ca.pem", "expired_update_policy = refuse",
                     "[source https://a]\npinned_sha256 = abc", "[channel tools]\nmirror_weight = 3", "= 5"] {
            #expect(throws: DaemonError.self, "\(text)") {
                var c = DaemonConfiguration()
                try c.apply(DaemonConfiguration.parse(text))
            }
        }
    }

    @Test("Given bad lines, when parsed, then a bad_configuration error names the line", arguments: [
        "nonsense", "poll_intervall = 5", "socket_mode = 999", "poll_interval = -1", "log_level = loud", "max_body_bytes = 0",
        "backoff_min = 0", "bandwidth_cap = -5", "[channel x]\nsocket = /a", "[source]", "[source https://a]\nchannel = y",
        "netrc_file = relative/netrc", "expired_updates = maybe", "approximate_dense_above = -1", "dense_shortlist = 0",
        "dense_shortlist = 1.5", "spare_index_min_bytes = -1", "spare_index_min_bytes = lots",
        "direct_install_min_bytes = -1", "direct_install_min_bytes = big",
        // Times that trapped where they became a Duration or nanoseconds, or that polled with no wait.
        "poll_interval = inf", "poll_interval = 1e17", "poll_interval = 0.0005", "idle_timeout = 1e10", "idle_timeout = nan",
        "backoff_max = inf", "stall_timeout = 1e300", "[channel x]\npoll_interval = inf",
        "slow_source_rate = -1", "slow_source_rate = fast", "slow_source_window = 0.5", "slow_source_window = inf",
        "stop_timeout = 0", "stop_timeout = forever",
        "sync_request_interval = -1", "sync_request_interval = inf", "sync_request_interval = often",
        // Counts that trapped where the pool adds them, or started a thread each.
        // A socket neither its owner nor its group can connect to serves nobody but root.
        "socket_mode = 0000", "socket_mode = 0406",
        "max_queued_queries = 9223372036854775807", "max_concurrent_queries = 3000000000000000000", "max_concurrent_queries = 100000",
        // A comment where the value goes is no value, and paths must not depend on the working folder.
        "data_dir =   # default", "socket = # default", "data_dir = var/cairn", "socket =",
        // A single-valued key set twice: which one counts would be the file's order, silently.
        "channel = a\nchannel = b",
    ])
    func badLines(_ line: String) {
        #expect {
            var c = DaemonConfiguration()
            try c.apply(DaemonConfiguration.parse("# ok\n" + line))
        } throws: { error in
            let error = error as? DaemonError
            return error?.code == .badConfiguration && error?.message.contains(line.contains("\n") ? "line 3" : "line 2") == true
        }
    }

    @Test("Given a config file saved with CRLF or CR line ends, or with a byte-order mark, when parsed, then it is read line by line (a leading comment does not swallow the file; a bad key names its line)",
          arguments: ["\r\n", "\r"])
    func windowsLineEnds(_ end: String) throws {
        var c = DaemonConfiguration()
        try c.apply(DaemonConfiguration.parse("\u{FEFF}# cairnd" + end + "channel = beta" + end + "poll_interval = 60" + end))
        #expect(c.channel == "beta" && c.pollInterval == 60)
        #expect {
            var c = DaemonConfiguration()
            try c.apply(DaemonConfiguration.parse("# cairnd" + end + "sorce = https://kb.example" + end))
        } throws: { error in
            (error as? DaemonError)?.code == .badConfiguration && (error as? DaemonError)?.message.contains("line 2") == true
        }
    }

    @Test("Given private-source files outside and inside [source URL] sections, when parsed, then globals apply to every source and a section's to its own")
    func sourceSections() throws {
        var c = DaemonConfiguration()
        try c.apply(DaemonConfiguration.parse("""
            source = https://a.example/repo
            ca_bundle = /etc/ca.pem
            [source https://a.example/repo/]
            token_file = /etc/a.token
            client_cert = /etc/a.pem
            """))
        #expect(c.sources == ["https://a.example/repo"])
        #expect(c.defaultSourceAccess.caBundle == "/etc/ca.pem" && c.defaultSourceAccess.tokenFile == nil)
        let a = try #require(c.sourceAccess["https://a.example/repo"])
        #expect(a.tokenFile == "/etc/a.token" && a.clientCertificate == "/etc/a.pem" && a.caBundle == nil)
    }

    @Test("Given proxy settings, when parsed, then a global proxy applies to every source, a section's proxy = none sends its source direct, and a proxy with credentials, another scheme or no host, or a relative proxy_auth_file, is refused in one line that shows no password")
    func proxies() throws {
        var c = DaemonConfiguration()
        try c.apply(DaemonConfiguration.parse("""
            source = https://a.example/repo
            source = http://lan.example/repo
            proxy = http://proxy.example:3128
            proxy_auth_file = /etc/cairn/proxy-login
            [source http://lan.example/repo]
            proxy = none
            """))
        #expect(c.defaultSourceAccess.proxy == "http://proxy.example:3128" && c.defaultSourceAccess.proxyAuthFile == "/etc/cairn/proxy-login")
        #expect(c.sourceAccess["http://lan.example/repo"]?.proxy == "")
        // What each source's transfers get: a stick and a source going direct no proxy login.
        let key = NSTemporaryDirectory() + "cairn-config-\(UUID().uuidString).pub"
        try PublisherKey.generate().publicKey.fileText.write(toFile: key, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: key) }
        c.trustedKeys = [key]
        let sync = try Device.syncConfiguration(c)
        #expect(sync.access(for: "https://a.example/repo").proxyAuthFile == "/etc/cairn/proxy-login")
        let lan = sync.access(for: "http://lan.example/repo"), stick = sync.access(for: "file:///media/usb/repo")
        #expect(lan.proxy == "" && lan.proxyAuthFile == nil && stick.proxy == nil && stick.proxyAuthFile == nil)
        try c.apply(DaemonConfiguration.parse("proxy = socks5h://[fd00::1]:1080/"))
        #expect(c.defaultSourceAccess.proxy == "socks5h://[fd00::1]:1080/")
        #expect(c.defaultSourceAccess.proxyCABundle == nil)
        for (line, says) in [("proxy = http://site:hunter2@proxy.example:3128", "proxy_auth_file"),
                             ("proxy = http://site:hunter2/x@proxy.example:3128", "proxy_auth_file"),
                             ("proxy = ftp://proxy.example:21", "must be none or start with"),
                             ("proxy = proxy.example:3128", "must be none or start with"),
                             ("proxy = http://:3128", "SCHEME://HOST:PORT"),
                             ("proxy = http://proxy.example", "the port given"),
                             ("proxy = http://proxy.example:3128/path", "SCHEME://HOST:PORT"),
                             ("proxy = http://fd00::1:3128", "SCHEME://HOST:PORT"),
                             ("proxy_auth_file = proxy-login", "absolute file path"),
                             ("proxy_ca_bundle = ca.pem", "absolute file path"),
                             ("[source file:///media/usb/repo]\nproxy = none", "for http(s) sources")] {
            var d = DaemonConfiguration()
            #expect {
                try d.apply(DaemonConfiguration.parse(line))
            } throws: { error in
                let message = (error as? DaemonError)?.message ?? ""
                return (error as? DaemonError)?.code == .badConfiguration && message.contains(says) && message.hasPrefix("config line")
                    && !message.contains("hunter2") && !message.contains("\n")
            }
        }
    }

    @Test("Given a [source URL] section for a further channel's source, then the daemon accepts it and that channel gets its files; a section naming no source is refused")
    func sourceSectionForAChannel() throws {
        let key = NSTemporaryDirectory() + "cairn-config-\(UUID().uuidString).pub"
        try PublisherKey.generate().publicKey.fileText.write(toFile: key, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: key) }
        var c = DaemonConfiguration()
        try c.apply(DaemonConfiguration.parse("""
            source = https://a.example/repo
            trusted_key = \(key)
            [channel manuals]
            source = https://b.example/repo/
            trusted_key = \(key)
            [source https://b.example/repo]
            token_file = /etc/b.token
            """))
        try Device.checkSourceSections(c)
        _ = try Device.syncConfiguration(c)
        let manuals = try Device.syncConfiguration(c.configuration(for: c.extraChannels[0]))
        #expect(manuals.access(for: "https://b.example/repo/").tokenFile == "/etc/b.token")
        try c.apply(DaemonConfiguration.parse("[source https://c.example]\ntoken_file = /etc/c.token"))
        #expect(throws: DaemonError.self) { try Device.checkSourceSections(c) }
    }

    @Test("Given a file whose source has a [source URL] section, when --source or CAIRN_SOURCES replaces the sources (a stick instead of the origin), then that section goes with its source and the daemon starts; a further channel's section stays")
    func replacedSourcesTakeTheirSections() throws {
        let text = """
            source = https://a.example/repo
            [source https://a.example/repo]
            token_file = /etc/a.token
            [channel manuals]
            source = https://b.example/repo
            [source https://b.example/repo]
            token_file = /etc/b.token
            """
        var flags = DaemonConfiguration()
        try flags.apply(DaemonConfiguration.parse(text))
        flags.replaceSources(with: ["file:///media/usb/repo"])
        #expect(flags.sources == ["file:///media/usb/repo"])
        #expect(flags.sourceAccess["https://a.example/repo"] == nil && flags.sourceAccess["https://b.example/repo"] != nil)
        try Device.checkSourceSections(flags)
        var environment = DaemonConfiguration()
        try environment.apply(DaemonConfiguration.parse(text))
        environment.apply(environment: ["CAIRN_SOURCES": "file:///media/usb/repo"])
        try Device.checkSourceSections(environment)
    }

    @Test("Given max_concurrent_queries set and max_queued_queries not, then the queue is 4 x the concurrency set (not the default concurrency's); set, it is kept")
    func queueFollowsConcurrency() throws {
        var c = DaemonConfiguration()
        try c.apply(DaemonConfiguration.parse("max_concurrent_queries = 2"))
        #expect(c.maxQueuedQueries == 8)
        try c.apply(DaemonConfiguration.parse("max_queued_queries = 5\nmax_concurrent_queries = 3"))
        #expect(c.maxQueuedQueries == 5)
    }

    @Test("Given CAIRN_* variables, when applied, then they override the file's values")
    func environment() throws {
        var c = DaemonConfiguration()
        try c.apply(DaemonConfiguration.parse("socket = /from-file\nsource = https://from-file.example"))
        c.apply(environment: ["CAIRN_SOCKET": "/env.sock", "CAIRN_DATA_DIR": "/env-data", "CAIRN_CHANNEL": "edge",
                              "CAIRN_SOURCES": "https://x.example, file:///usb"])
        #expect(c.socketPath == "/env.sock" && c.dataDirectory == "/env-data" && c.channel == "edge")
        #expect(c.sources == ["https://x.example", "file:///usb"])
    }

    @Test("Given no settings, when defaults are read, then they are the documented ones")
    func defaults() {
        let c = DaemonConfiguration()
        #expect(c.socketPath == "/run/cairn/cairnd.sock" && c.dataDirectory == "/var/lib/cairn" && c.channel == "stable")
        #expect(c.socketMode == 0o660 && c.maxBodyBytes == 65_536 && c.pollInterval == 300 && c.idleTimeout == 30)
        #expect(c.maxConcurrentQueries == 2 * ProcessInfo.processInfo.activeProcessorCount)
        #expect(c.maxQueuedQueries == 4 * c.maxConcurrentQueries)
        #expect(c.spareIndexMinimumBytes == 256 << 20 && c.directInstallMinimumBytes == 64 << 20)
    }
}
