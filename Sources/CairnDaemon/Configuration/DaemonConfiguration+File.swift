import CairnStore
import Foundation
import Logging

extension DaemonConfiguration {
    /// One `key = value` line of a config file.
    public struct Entry: Sendable, Hashable {
        public var key: String
        public var value: String
        public var line: Int
    }

    /// The keys a config file may hold; `source` and `trusted_key` may repeat.
    public static let knownKeys: Set<String> = [
        "source", "channel", "trusted_key", "data_dir", "socket", "poll_interval", "socket_mode",
        "socket_group", "log_level", "max_concurrent_queries", "max_queued_queries", "max_body_bytes",
        "max_connections", "idle_timeout", "backoff_min", "backoff_max", "bandwidth_cap",
        "stall_timeout",
    ]

    /// Parses config file text: `key = value` lines; blank lines and lines starting with `#`
    /// are ignored; a value may be wrapped in double quotes (kept verbatim inside). A `#` after
    /// a value starts a comment only when preceded by whitespace.
    public static func parse(_ text: String) throws(DaemonError) -> [Entry] {
        var entries: [Entry] = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            var line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let equals = line.firstIndex(of: "=") else {
                throw DaemonError(.badConfiguration, "config line \(number) is not `key = value`")
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            line = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("\""), let close = line.dropFirst().firstIndex(of: "\"") {
                line = String(line[line.index(after: line.startIndex)..<close])
            } else if let comment = line.range(of: " #") ?? line.range(of: "\t#") {
                line = line[..<comment.lowerBound].trimmingCharacters(in: .whitespaces)
            }
            guard knownKeys.contains(key) else {
                throw DaemonError(.badConfiguration, "config line \(number): unknown key \"\(key)\"")
            }
            entries.append(Entry(key: key, value: line, line: number))
        }
        return entries
    }

    /// Reads and applies the config file at `path`.
    public mutating func apply(file path: String) throws(DaemonError) {
        let bytes: [UInt8]
        do {
            bytes = try FileSystem.read(path)
        } catch {
            let reason = error.errno.map { String(cString: strerror($0)) } ?? error.message
            throw DaemonError(.badConfiguration, "cannot read the config file \(path) (\(reason)); fix it or pass another --config")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw DaemonError(.badConfiguration, "the config file \(path) is not UTF-8 text; fix it or pass another --config")
        }
        try apply(try Self.parse(text))
    }

    /// Applies parsed entries in order; repeatable keys accumulate, others replace.
    public mutating func apply(_ entries: [Entry]) throws(DaemonError) {
        var sawSource = false, sawKey = false
        for entry in entries {
            let v = entry.value
            func bad(_ what: String) -> DaemonError {
                DaemonError(.badConfiguration, "config line \(entry.line): \(entry.key) must be \(what)")
            }
            switch entry.key {
            case "source":
                if !sawSource { sources = []; sawSource = true }
                sources.append(v)
            case "trusted_key":
                if !sawKey { trustedKeys = []; sawKey = true }
                trustedKeys.append(v)
            case "channel": channel = v
            case "data_dir": dataDirectory = v
            case "socket": socketPath = v
            case "socket_group": socketGroup = v.isEmpty ? nil : v
            case "poll_interval":
                guard let seconds = Double(v), seconds > 0 else { throw bad("a positive number of seconds") }
                pollInterval = seconds
            case "backoff_min", "backoff_max":
                guard let seconds = Double(v), seconds > 0 else { throw bad("a positive number of seconds") }
                if entry.key == "backoff_min" { backoffMinimum = seconds } else { backoffMaximum = seconds }
            case "bandwidth_cap":
                guard let bytes = Int64(v), bytes >= 0 else { throw bad("bytes per second (0 for no cap)") }
                bandwidthCap = bytes == 0 ? nil : bytes
            case "stall_timeout":
                guard let seconds = Double(v), seconds >= 1 else { throw bad("at least 1 second") }
                stallTimeout = seconds
            case "idle_timeout":
                guard let seconds = Double(v), seconds > 0 else { throw bad("a positive number of seconds") }
                idleTimeout = seconds
            case "socket_mode":
                guard let mode = UInt32(v, radix: 8), mode <= 0o777 else { throw bad("an octal mode like 0660") }
                socketMode = mode
            case "log_level":
                guard let level = Logger.Level(rawValue: v.lowercased()) else { throw bad("a log level (info, debug, …)") }
                logLevel = level
            case "max_concurrent_queries": maxConcurrentQueries = try positive(v, bad)
            case "max_queued_queries":
                guard let n = Int(v), n >= 0 else { throw bad("a non-negative integer") }
                maxQueuedQueries = n
            case "max_body_bytes": maxBodyBytes = try positive(v, bad)
            case "max_connections": maxConnections = try positive(v, bad)
            default: throw DaemonError(.badConfiguration, "config line \(entry.line): unknown key \"\(entry.key)\"")
            }
        }
    }

    /// Applies `CAIRN_SOCKET`, `CAIRN_DATA_DIR`, `CAIRN_CHANNEL` and `CAIRN_SOURCES`
    /// (comma-separated) when set and not empty.
    public mutating func apply(environment: [String: String]) {
        if let value = environment["CAIRN_SOCKET"], !value.isEmpty { socketPath = value }
        if let value = environment["CAIRN_DATA_DIR"], !value.isEmpty { dataDirectory = value }
        if let value = environment["CAIRN_CHANNEL"], !value.isEmpty { channel = value }
        if let value = environment["CAIRN_SOURCES"], !value.isEmpty {
            sources = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
    }

    private func positive(_ value: String, _ bad: (String) -> DaemonError) throws(DaemonError) -> Int {
        guard let n = Int(value), n > 0 else { throw bad("a positive integer") }
        return n
    }
}
