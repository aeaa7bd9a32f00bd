public import CairnClient
import CairnCore
import CairnStore
import CairnSync
import Foundation
import Logging

extension DaemonConfiguration {
    public typealias Entry = CairndConfigFile.Entry

    /// Parses config file text (`CairndConfigFile.parse`), as a `bad_configuration` error.
    public static func parse(_ text: String) throws(DaemonError) -> [Entry] {
        do { return try CairndConfigFile.parse(text) } catch { throw DaemonError(.badConfiguration, error.message) }
    }

    /// Reads and applies the config file at `path`.
    public mutating func apply(file path: String) throws(DaemonError) {
        let text: String
        do { text = try FileSystem.readText(path) } catch {
            throw DaemonError(.badConfiguration, "cannot read the config file \(path) (\(error.reason)); fix it or pass another --config")
        }
        // The file named: cairnd may have read /etc/cairn/cairnd.conf without --config.
        do { try apply(try Self.parse(text)) } catch {
            throw DaemonError(error.code, "\(path): \(error.message)")
        }
    }

    /// Applies parsed entries in order; repeatable keys accumulate, others replace.
    public mutating func apply(_ entries: [Entry]) throws(DaemonError) {
        var sawSource = false, sawKey = false
        for entry in entries {
            let v = entry.value
            // A key CairndConfigFile.parse let through unknown (not a typo of a known one).
            guard CairndConfigFile.knownKeys.contains(entry.key) else {
                ignoredKeys.append("config line \(entry.line): \(entry.key)")
                continue
            }
            if let name = entry.channel {
                try applyChannel(entry, name: name)
                continue
            }
            if CairndConfigFile.sectionKeys.contains(entry.key) {
                if let source = entry.source, entry.key.hasPrefix("proxy"), !SourceURL.isHTTP(source) {
                    throw DaemonError(.badConfiguration, "config line \(entry.line): \(entry.key) is for http(s) sources; \(source) is not one")
                }
                if entry.key == "proxy" {
                    if let problem = SourceAccess.proxyProblem(v) {
                        throw DaemonError(.badConfiguration, "config line \(entry.line): \(problem)")
                    }
                } else if v.isEmpty || !v.hasPrefix("/") {
                    throw DaemonError(.badConfiguration, "config line \(entry.line): \(entry.key) must be an absolute file path")
                }
                if let source = entry.source {
                    let key = SourceAccess.base(of: source)
                    sourceAccess[key, default: .none].set(entry.key, v)
                } else {
                    defaultSourceAccess.set(entry.key, v)
                }
                continue
            }
            func bad(_ what: String) -> DaemonError {
                DaemonError(.badConfiguration, "config line \(entry.line): \(entry.key) must be \(what)")
            }
            /// A number of rows (0 allowed), or `Int.max` for `never`.
            func rowsOrNever() throws(DaemonError) -> Int {
                guard let rows = CairndConfigFile.rows(v) else { throw bad("a number of rows (0 for always) or never") }
                return rows
            }
            /// A size in bytes (0 allowed), or nil for `never`.
            func bytesOrNever() throws(DaemonError) -> Int64? {
                if v == "never" { return nil }
                guard let bytes = v == "0" ? 0 : Self.byteCount(v) else { throw bad("a number of bytes (suffix K, M, G or T allowed) or never") }
                return bytes
            }
            switch entry.key {
            case "source":
                if let problem = SourceURL.problem(v) { throw DaemonError(.badConfiguration, "config line \(entry.line): \(problem)") }
                if !sawSource { sources = []; sawSource = true }
                sources.append(v)
            case "trusted_key":
                if !sawKey { trustedKeys = []; sawKey = true }
                trustedKeys.append(v)
            case "trusted_root": trustedRoot = v
            case "expired_updates":
                guard ["install", "refuse"].contains(v) else { throw bad("install or refuse") }
                expiredUpdates = v
            case "max_disk_bytes":
                guard let bytes = Self.byteCount(v) else { throw bad("a positive number of bytes (suffix K, M, G or T allowed)") }
                maxDiskBytes = bytes
            case "spare_index_min_bytes": spareIndexMinimumBytes = try bytesOrNever()
            case "direct_install_min_bytes": directInstallMinimumBytes = try bytesOrNever()
            case "approximate_dense_above": ranking.approximateDenseAbove = try rowsOrNever()
            case "lexical_words":
                guard let words = Int(v), words >= 1 else { throw bad("a number of words, at least 1") }
                ranking.lexicalWords = words
            case "approximate_lexical_above": ranking.approximateLexicalAbove = try rowsOrNever()
            case "lexical_postings_above": ranking.lexicalPostingsAbove = try rowsOrNever()
            case "dense_shortlist":
                guard let share = Double(v), share > 0, share <= 1 else { throw bad("a fraction of the rows above 0, at most 1") }
                ranking.shortlistFraction = share
            case "channel": channel = v
            // Absolute: under a service manager the working folder is `/`.
            case "data_dir":
                guard v.hasPrefix("/") else { throw bad("an absolute path") }
                dataDirectory = v
            case "socket":
                guard v.hasPrefix("/") else { throw bad("an absolute path") }
                socketPath = v
            case "socket_group": socketGroup = v.isEmpty ? nil : v
            case "operator_group": operatorGroup = v.isEmpty ? nil : v
            case "poll_interval":
                pollInterval = try Self.seconds(v, bad)
            case "backoff_min", "backoff_max":
                let seconds = try Self.seconds(v, bad)
                if entry.key == "backoff_min" { backoffMinimum = seconds } else { backoffMaximum = seconds }
            case "sync_request_interval":
                syncRequestInterval = try Self.seconds(v, bad, atLeast: 0)
            case "bandwidth_cap":
                guard let bytes = Int64(v), bytes >= 0 else { throw bad("bytes per second (0 for no cap)") }
                bandwidthCap = bytes == 0 ? nil : bytes
            case "stall_timeout":
                stallTimeout = try Self.seconds(v, bad, atLeast: 1)
            case "slow_source_rate":
                guard let bytes = Int(v), bytes >= 0, bytes <= 1 << 40 else { throw bad("bytes per second (0: never)") }
                slowSourceRate = bytes
            case "stop_timeout":
                stopTimeout = try Self.seconds(v, bad)
            case "slow_source_window":
                slowSourceWindow = try Self.seconds(v, bad, atLeast: 1)
            case "idle_timeout":
                idleTimeout = try Self.seconds(v, bad)
            case "socket_mode":
                // Its owner or its group must read and write it: `0000` started a daemon nobody but
                // root could query. (A group-only `0060` with socket_group stays allowed.)
                guard let mode = UInt32(v, radix: 8), mode <= 0o777, mode & 0o600 == 0o600 || mode & 0o060 == 0o060 else {
                    throw bad("an octal mode that lets its owner or group read and write, like 0660")
                }
                socketMode = mode
            case "log_level":
                guard let level = Logger.Level(rawValue: v.lowercased()) else { throw bad("a log level (info, debug, …)") }
                logLevel = level
            // Bounded: each is a thread with its own stack, and the pool adds the two.
            case "max_concurrent_queries":
                guard let n = Int(v), (1...256).contains(n) else { throw bad("a whole number 1-256") }
                maxConcurrentQueries = n
            case "max_queued_queries":
                guard let n = Int(v), (0...1_000_000).contains(n) else { throw bad("a whole number 0-1000000") }
                maxQueuedQueries = n
            // A body is read as JSON by a parser that takes at most 1 MiB (CanonicalJSON): a
            // larger value, which a file written before 2026-12-06 may hold, counts as 1 MiB
            // rather than stop a device that started with it before.
            case "max_body_bytes": maxBodyBytes = min(try positive(v, bad), CanonicalJSON.maxInputBytes)
            case "max_connections": maxConnections = try positive(v, bad)
            default: throw DaemonError(.badConfiguration, "config line \(entry.line): unknown key \"\(entry.key)\"")
            }
        }
    }

    /// `2147483648`, `2048M`, `2G`: bytes, or K, M, G, T times powers of 1024; nil unless positive.
    static func byteCount(_ text: String) -> Int64? {
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        let unit = text.last.flatMap { units[Character($0.uppercased())] }
        guard let number = Int64(unit == nil ? text : String(text.dropLast())), number > 0 else { return nil }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: unit ?? 1)
        return overflow ? nil : bytes
    }

    /// A line of a `[channel NAME]` section.
    private mutating func applyChannel(_ entry: Entry, name: String) throws(DaemonError) {
        let index = extraChannels.firstIndex { $0.name == name } ?? {
            extraChannels.append(ChannelSettings(name: name))
            return extraChannels.count - 1
        }()
        let v = entry.value
        switch entry.key {
        case "source":
            if let problem = SourceURL.problem(v) { throw DaemonError(.badConfiguration, "config line \(entry.line): \(problem)") }
            extraChannels[index].sources.append(v)
        case "trusted_key": extraChannels[index].trustedKeys.append(v)
        case "trusted_root": extraChannels[index].trustedRoot = v
        case "poll_interval":
            extraChannels[index].pollInterval = try Self.seconds(v) { DaemonError(.badConfiguration, "config line \(entry.line): poll_interval must be \($0)") }
        case "max_disk_bytes":
            guard let bytes = Self.byteCount(v) else {
                throw DaemonError(.badConfiguration, "config line \(entry.line): max_disk_bytes must be a positive number of bytes (suffix K, M, G or T allowed)")
            }
            extraChannels[index].maxDiskBytes = bytes
        default:
            guard ["install", "refuse"].contains(v) else {
                throw DaemonError(.badConfiguration, "config line \(entry.line): expired_updates must be install or refuse")
            }
            extraChannels[index].expiredUpdates = v
        }
    }

    /// The configuration of the daemon's channel `settings` names: this one's with the channel,
    /// its sources, trust, schedule and data directory (`DIR/channels/<name>`) replaced.
    public func configuration(for settings: ChannelSettings) -> DaemonConfiguration {
        var c = self
        c.channel = settings.name
        c.sources = settings.sources
        c.trustedKeys = settings.trustedKeys
        c.trustedRoot = settings.trustedRoot
        c.pollInterval = settings.pollInterval ?? pollInterval
        c.expiredUpdates = settings.expiredUpdates ?? expiredUpdates
        c.maxDiskBytes = settings.maxDiskBytes ?? maxDiskBytes
        c.dataDirectory = (dataDirectory as NSString).appendingPathComponent("channels/" + settings.name)
        c.extraChannels = []
        return c
    }

    /// Applies `CAIRN_SOCKET`, `CAIRN_DATA_DIR`, `CAIRN_CHANNEL` and `CAIRN_SOURCES`
    /// (comma-separated) when set and not empty.
    public mutating func apply(environment: [String: String]) {
        if let value = environment["CAIRN_SOCKET"], !value.isEmpty { socketPath = value }
        if let value = environment["CAIRN_DATA_DIR"], !value.isEmpty { dataDirectory = value }
        if let value = environment["CAIRN_CHANNEL"], !value.isEmpty { channel = value }
        if let value = environment["CAIRN_SOURCES"], !value.isEmpty {
            replaceSources(with: value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
        }
    }

    /// Replaces the daemon's channel's sources (CAIRN_SOURCES, `--source`): the `[source URL]`
    /// sections of the sources replaced go with them, as the flags override the file (a section
    /// naming no source at all is still refused at start).
    public mutating func replaceSources(with replacement: [String]) {
        let kept = Set((replacement + extraChannels.flatMap(\.sources)).map(SourceAccess.base(of:)))
        for replaced in sources.map(SourceAccess.base(of:)) where !kept.contains(replaced) {
            sourceAccess[replaced] = nil
        }
        sources = replacement
    }

    /// A time setting in seconds: a finite number from `atLeast` (a millisecond: what the timers
    /// resolve) to a billion (31 years). Beyond, `inf` or `1e17` would trap where the seconds
    /// become a `Duration` or nanoseconds, and a value below a millisecond would poll with no
    /// wait at all.
    static func seconds(_ value: String, _ bad: (String) -> DaemonError, atLeast minimum: Double = 0.001) throws(DaemonError) -> Double {
        guard let seconds = Double(value), secondsInRange(seconds, atLeast: minimum) else {
            throw bad("a number of seconds from \(minimum == 1 ? "1" : minimum == 0 ? "0" : "0.001") to 1000000000")
        }
        return seconds
    }

    public static func secondsInRange(_ seconds: Double, atLeast minimum: Double = 0.001) -> Bool {
        seconds.isFinite && seconds >= minimum && seconds <= 1e9
    }

    private func positive(_ value: String, _ bad: (String) -> DaemonError) throws(DaemonError) -> Int {
        guard let n = Int(value), n > 0 else { throw bad("a positive integer") }
        return n
    }
}
