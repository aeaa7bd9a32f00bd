import CairnCore
public import Foundation

/// cairnd's config file format (client-config/cairnd.conf): `key = value` lines, and
/// `[source URL]` sections whose lines (`sectionKeys` only) apply to that source, and
/// `[channel NAME]` sections (`channelKeys` only) for each further channel followed. cairnd reads
/// every key; a client reads `socket` from it to find the daemon.
public enum CairndConfigFile {
    /// Where cairnd and its clients look for the file when none is named.
    public static let defaultPath = "/etc/cairn/cairnd.conf"
    /// The socket when neither the environment nor a config file names one.
    public static let defaultSocketPath = "/run/cairn/cairnd.sock"

    /// Why a config file's text is refused, one line naming the line.
    public struct Invalid: Error, Sendable {
        public let message: String
    }

    /// One `key = value` line of a config file.
    public struct Entry: Sendable, Hashable {
        public var key: String
        public var value: String
        public var line: Int
        /// The source URL of the `[source URL]` section the line is in; nil outside sections.
        public var source: String? = nil
        /// The channel of the `[channel NAME]` section the line is in; nil outside sections.
        public var channel: String? = nil
    }

    /// The keys a `[channel NAME]` section may hold: that channel's sources, trust and schedule.
    public static let channelKeys: Set<String> = ["source", "trusted_key", "trusted_root", "poll_interval", "expired_updates",
                                                  "max_disk_bytes"]

    /// The keys a `[source URL]` section may hold (files for a private source, the proxy on the
    /// way); outside a section they apply to every source.
    public static let sectionKeys: Set<String> = ["netrc_file", "token_file", "ca_bundle", "client_cert", "client_key",
                                                  "proxy", "proxy_auth_file", "proxy_ca_bundle"]

    /// The keys this build reads; `source` and `trusted_key` may repeat. Any other key is
    /// skipped (`parse`), unless it is a typo of one of these.
    public static let knownKeys: Set<String> = Set<String>([
        "source", "channel", "trusted_key", "data_dir", "socket", "poll_interval", "socket_mode",
        "socket_group", "operator_group", "log_level", "max_concurrent_queries", "max_queued_queries", "max_body_bytes",
        "max_connections", "idle_timeout", "backoff_min", "backoff_max", "sync_request_interval", "bandwidth_cap",
        "stall_timeout", "slow_source_rate", "slow_source_window", "stop_timeout", "trusted_root", "expired_updates", "max_disk_bytes", "spare_index_min_bytes", "direct_install_min_bytes", "approximate_dense_above", "dense_shortlist", "approximate_lexical_above", "lexical_words", "lexical_postings_above",
    ]).union(sectionKeys)

    /// The value of a setting in rows (`approximate_dense_above`, `approximate_lexical_above`,
    /// `lexical_postings_above`): a number of rows, 0 or more (0: always), or `never` (`Int.max`);
    /// nil for anything else.
    public static func rows(_ value: String) -> Int? {
        if value == "never" { return .max }
        guard let rows = Int(value), rows >= 0 else { return nil }
        return rows
    }

    /// Parses config file text: `key = value` lines; blank lines and lines starting with `#`
    /// are ignored; a value may be wrapped in double quotes (kept verbatim inside). A `#` after
    /// a value starts a comment only when preceded by whitespace.
    public static func parse(_ text: String) throws(CairndConfigFile.Invalid) -> [Entry] {
        var entries: [Entry] = []
        var section: String?, channel: String?
        // Where each key was set, by section: only `source` and `trusted_key` may repeat; any
        // other set twice would be the last line's silently.
        var seen: [String: Int] = [:]
        for (index, raw) in TextLines.of(text).enumerated() {
            let number = index + 1
            var line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                let words = line.dropFirst().dropLast().split(separator: " ", maxSplits: 1).map(String.init)
                guard line.hasSuffix("]"), words.count == 2, ["source", "channel"].contains(words[0]), !words[1].isEmpty else {
                    throw Invalid(message: "config line \(number): a section is `[source URL]` or `[channel NAME]`")
                }
                let name = words[1].trimmingCharacters(in: .whitespaces)
                (section, channel) = words[0] == "source" ? (name, nil) : (nil, name)
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw Invalid(message: "config line \(number) is not `key = value`")
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            line = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("\""), let close = line.dropFirst().firstIndex(of: "\"") {
                line = String(line[line.index(after: line.startIndex)..<close])
            } else if line.hasPrefix("#") {
                // `key =   # a comment`: no value, not the comment as one.
                line = ""
            } else if let comment = line.range(of: " #") ?? line.range(of: "\t#") {
                line = line[..<comment.lowerBound].trimmingCharacters(in: .whitespaces)
            }
            guard !key.isEmpty else { throw Invalid(message: "config line \(number) has no key before =") }
            guard knownKeys.contains(key) else {
                // A key this build does not know is skipped (cairnd warns): a file pushed to a
                // fleet may name one a newer cairnd reads. Refused: a typo of a known key (a
                // letter or two off, or another case or `-` for `_`), and one that may be about
                // trust or access, which skipped would leave the device trusting or sending more
                // than the file meant.
                let folded = key.lowercased().replacingOccurrences(of: "-", with: "_")
                if let meant = knownKeys.filter({ Self.editDistance($0, folded, atMost: 2) != nil }).sorted().first {
                    throw Invalid(message: "config line \(number): unknown key \"\(key)\"; did you mean \(meant)?")
                }
                if section != nil || channel != nil || !Set(folded.split(separator: "_").map(String.init)).isDisjoint(with: trustWords) {
                    throw Invalid(message: "config line \(number): unknown key \"\(key)\"; a key about sources, trust or access that this cairnd does not know is refused, not skipped")
                }
                entries.append(Entry(key: key, value: line, line: number, source: section, channel: channel))
                continue
            }
            if section != nil, !sectionKeys.contains(key) {
                throw Invalid(message: "config line \(number): \(key) does not belong in a [source] section (only \(sectionKeys.sorted().joined(separator: ", ")))")
            }
            if channel != nil, !channelKeys.contains(key) {
                throw Invalid(message: "config line \(number): \(key) does not belong in a [channel] section (only \(channelKeys.sorted().joined(separator: ", ")))")
            }
            let scope = "\(section.map { "source \($0)" } ?? channel.map { "channel \($0)" } ?? "")|\(key)"
            if key != "source", key != "trusted_key", let first = seen[scope] {
                throw Invalid(message: "config line \(number): \(key) is set again (first on line \(first)); set it once")
            }
            seen[scope] = number
            entries.append(Entry(key: key, value: line, line: number, source: section, channel: channel))
        }
        return entries
    }

    /// Words of a key about what the device trusts or sends where: an unknown key holding one is
    /// refused rather than skipped.
    static let trustWords: Set<String> = [
        "trust", "trusted", "root", "roots", "key", "keys", "ca", "cert", "certs", "certificate", "token", "netrc",
        "expired", "expires", "expiry", "source", "sources", "tls", "ssl", "auth", "password", "signing", "signature",
        "signer", "signers", "pin", "pinned", "proxy", "insecure", "verify", "threshold",
    ]

    /// The edit distance (insertions, deletions, substitutions) between `a` and `b`, or nil when
    /// it is above `limit`: one row of the table at a time.
    static func editDistance(_ a: String, _ b: String, atMost limit: Int) -> Int? {
        let (x, y) = (Array(a.utf8), Array(b.utf8))
        guard abs(x.count - y.count) <= limit else { return nil }
        var row = Array(0...y.count)
        for (i, byte) in x.enumerated() {
            var next = [i + 1]
            for (j, other) in y.enumerated() {
                next.append(min(row[j + 1] + 1, next[j] + 1, row[j] + (byte == other ? 0 : 1)))
            }
            row = next
        }
        return row[y.count] <= limit ? row[y.count] : nil
    }

    /// The socket a client should use: `CAIRN_SOCKET`, else `socket` in the default config file
    /// when it exists and parses, else the default path.
    public static func socketPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let value = environment["CAIRN_SOCKET"], !value.isEmpty { return value }
        if case .parsed(let entries) = defaultFile(), let socket = entries.last(where: { $0.key == "socket" }) {
            return socket.value
        }
        return defaultSocketPath
    }

    /// Why `socketPath` took nothing from the default config file though it is there (it cannot
    /// be read by this user, or does not parse), for the line saying cairnd cannot be reached;
    /// nil otherwise.
    public static func skippedNote(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        if let value = environment["CAIRN_SOCKET"], !value.isEmpty { return nil }
        switch defaultFile() {
        case .unreadable(let reason): return "\(defaultPath) could not be read (\(reason)), so its socket setting was not used"
        case .invalid(let message): return "\(defaultPath) did not parse (\(message)), so its socket setting was not used"
        case .absent, .parsed: return nil
        }
    }

    enum DefaultFile {
        case absent, unreadable(String), invalid(String), parsed([Entry])
    }

    static func defaultFile() -> DefaultFile {
        guard FileManager.default.fileExists(atPath: defaultPath) else { return .absent }
        guard let text = try? String(contentsOfFile: defaultPath, encoding: .utf8) else {
            return .unreadable(access(defaultPath, R_OK) == 0 ? "not UTF-8" : String(cString: strerror(errno)))
        }
        do { return .parsed(try parse(text)) } catch { return .invalid(error.message) }
    }
}
