import Foundation
public import Logging

/// Everything `cairn-server serve` needs to know. Every field has a default; the executable
/// layers a config file, then the environment, then flags on top (each later one wins).
///
/// Config file keys (`key = value`, `#` comments): `host`, `port`, `repo`, `log_level`,
/// `idle_timeout_seconds`, `max_connections`, `online_search`, `search_cache`,
/// `search_trusted_key`, `search_trusted_root`, `max_concurrent_searches`, `max_queued_searches`,
/// `search_allow_origin`.
/// Environment: `CAIRN_SERVER_HOST`, `CAIRN_SERVER_PORT`, `CAIRN_SERVER_REPO`,
/// `CAIRN_SERVER_LOG_LEVEL`, `CAIRN_SERVER_ONLINE_SEARCH`, `CAIRN_SERVER_SEARCH_CACHE`,
/// `CAIRN_SERVER_SEARCH_TRUSTED_KEY`, `CAIRN_SERVER_SEARCH_TRUSTED_ROOT`,
/// `CAIRN_SERVER_SEARCH_ALLOW_ORIGIN`.
public struct ServerConfiguration: Sendable, Equatable {
    /// Address to bind. Default `127.0.0.1` (loopback only; put a reverse proxy or set `0.0.0.0`
    /// to serve the network).
    public var host: String = "127.0.0.1"
    /// TCP port. Default 8080; 0 picks a free port (printed on start).
    public var port: Int = 8080
    /// The repository folder (protocol/repository.md). Default `/var/lib/cairn/repo`.
    public var repository: String = "/var/lib/cairn/repo"
    /// Log level. Default `info` (one line per request).
    public var logLevel: Logger.Level = .info
    /// Seconds a connection may stay without reading or writing before it is closed; this bounds
    /// slow or stalled clients (headers, bodies and downloads alike: a request must arrive whole,
    /// and a download's 128 KiB writes keep completing within 5 times it). Default 60.
    public var idleTimeoutSeconds: Int = 60
    /// Connections served at once; further ones wait in the listen backlog. Default 1024.
    public var maxConnections: Int = 1024
    /// Whether `POST /v1/channels/<c>/search` answers (protocol/online-search.md). Default
    /// false: each searched channel's newest version is kept open in memory with its model.
    public var onlineSearch: Bool = false
    /// The folder online search inflates versions and models into. Default nil:
    /// `cairn-server-search-<uid>` in the system's temporary folder. Created with mode 0700.
    public var searchCache: String?
    /// Public key files (`*.pub`) the manifests must be signed with for online search. Default
    /// empty: the keys the publisher stored under `<repo>/keys/` (integrity, not authorship).
    public var searchTrustedKeys: [String] = []
    /// A root file (protocol/root.md) online search pins instead of keys: manifests must meet the
    /// signing policy of the newest root that chains from it through `<repo>/root/`. Default nil.
    public var searchTrustedRoot: String?
    /// Searches run at once, each on a thread of its own. Default 2 × the number of cores (as
    /// cairnd's `max_concurrent_queries`).
    public var maxConcurrentSearches: Int = 2 * ProcessInfo.processInfo.activeProcessorCount
    /// Searches that may wait for a thread; beyond that 503 `busy`. Default 4 × the above.
    public var maxQueuedSearches: Int {
        get { queuedSearches ?? 4 * maxConcurrentSearches }
        set { queuedSearches = newValue }
    }
    /// `max_queued_searches` when set; else the queue follows `maxConcurrentSearches` as set.
    private var queuedSearches: Int?
    /// Web origins (`https://app.example`, or `*` for any) whose pages may call online search
    /// from a browser (CORS). Default empty: a browser lets no other origin's script read it.
    public var searchAllowOrigins: [String] = []

    /// The defaults above.
    public init() {}

    /// The defaults with the given repository folder.
    public init(repository: String) { self.repository = repository }
}

extension ServerConfiguration {
    /// Applies `key = value` lines of a config file (see `ConfigFile`).
    /// - Throws: `ServerError.Code.configurationInvalid` naming the line of an unknown key or bad value.
    public mutating func apply(configFile text: String) throws(ServerError) {
        for entry in try ConfigFile.parse(text) {
            try set(entry.key, entry.value, source: "line \(entry.line)")
        }
    }

    /// Applies `CAIRN_SERVER_HOST`, `_PORT`, `_REPO`, `_LOG_LEVEL`, `_ONLINE_SEARCH`,
    /// `_SEARCH_CACHE`, `_SEARCH_TRUSTED_KEY`, `_SEARCH_TRUSTED_ROOT` and `_SEARCH_ALLOW_ORIGIN`
    /// when present.
    /// - Throws: `ServerError.Code.configurationInvalid` for a bad value.
    public mutating func apply(environment: [String: String]) throws(ServerError) {
        let names = [("CAIRN_SERVER_HOST", "host"), ("CAIRN_SERVER_PORT", "port"),
                     ("CAIRN_SERVER_REPO", "repo"), ("CAIRN_SERVER_LOG_LEVEL", "log_level"),
                     ("CAIRN_SERVER_ONLINE_SEARCH", "online_search"), ("CAIRN_SERVER_SEARCH_CACHE", "search_cache"),
                     ("CAIRN_SERVER_SEARCH_TRUSTED_KEY", "search_trusted_key"),
                     ("CAIRN_SERVER_SEARCH_TRUSTED_ROOT", "search_trusted_root"),
                     ("CAIRN_SERVER_SEARCH_ALLOW_ORIGIN", "search_allow_origin")]
        for (variable, key) in names {
            guard let value = environment[variable] else { continue }
            // A list the file set is replaced, not added to: the environment overrides the
            // file (a key dropped there must not stay trusted, an origin not stay allowed).
            if key == "search_trusted_key" { searchTrustedKeys = [] }
            if key == "search_allow_origin" { searchAllowOrigins = [] }
            try set(key, value, source: variable)
        }
    }

    /// The settings as a whole, once every source is applied: a pinned root and pinned keys
    /// for online search are one or the other (the root would be used and the keys ignored).
    public func check() throws(ServerError) {
        if searchTrustedRoot != nil, !searchTrustedKeys.isEmpty {
            throw ServerError(.configurationInvalid, "search_trusted_root and search_trusted_key are both set; pin online search to one of them")
        }
    }

    /// Sets one setting by its config-file key.
    mutating func set(_ key: String, _ value: String, source: String) throws(ServerError) {
        func bad(_ why: String) -> ServerError {
            ServerError(.configurationInvalid, "\(source): \(key) \(why)")
        }
        switch key {
        case "host":
            guard !value.isEmpty else { throw bad("must not be empty") }
            host = value
        case "port":
            guard let port = Int(value), (0...65535).contains(port) else { throw bad("must be a port number 0-65535") }
            self.port = port
        case "repo":
            guard !value.isEmpty else { throw bad("must not be empty") }
            repository = value
        case "log_level":
            guard let level = Logger.Level(rawValue: value.lowercased()) else {
                throw bad("must be one of trace, debug, info, notice, warning, error, critical")
            }
            logLevel = level
        case "idle_timeout_seconds":
            guard let seconds = Int(value), seconds > 0 else { throw bad("must be a positive whole number") }
            idleTimeoutSeconds = seconds
        case "max_connections":
            guard let count = Int(value), count > 0 else { throw bad("must be a positive whole number") }
            maxConnections = count
        case "online_search":
            switch value.lowercased() {
            case "true", "yes", "on", "1": onlineSearch = true
            case "false", "no", "off", "0": onlineSearch = false
            default: throw bad("must be true or false")
            }
        case "search_cache":
            guard !value.isEmpty else { throw bad("must not be empty") }
            searchCache = value
        case "search_trusted_key":
            guard !value.isEmpty else { throw bad("must not be empty") }
            searchTrustedKeys.append(value)
        case "search_trusted_root":
            guard !value.isEmpty else { throw bad("must not be empty") }
            searchTrustedRoot = value
        case "max_concurrent_searches":
            guard let count = Int(value), (1...256).contains(count) else { throw bad("must be a whole number 1-256") }
            maxConcurrentSearches = count
        case "max_queued_searches":
            guard let count = Int(value), (0...1_000_000).contains(count) else { throw bad("must be a whole number 0-1000000") }
            maxQueuedSearches = count
        case "search_allow_origin":
            // An origin as browsers send it: scheme and host (and port), no path, no slash.
            let origin = value.lowercased()
            let rest = origin.hasPrefix("https://") ? origin.dropFirst(8) : origin.hasPrefix("http://") ? origin.dropFirst(7) : nil
            guard value == "*" || rest.map({ !$0.isEmpty && !$0.contains("/") && !$0.contains(" ") }) == true else {
                throw bad("must be * or an origin like https://app.example (scheme and host, no path)")
            }
            searchAllowOrigins.append(origin)
        default:
            throw ServerError(.configurationInvalid, "\(source): unknown key '\(key)'")
        }
    }
}
