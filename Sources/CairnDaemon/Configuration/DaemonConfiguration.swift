import CairnClient
public import CairnIndex
public import CairnSync
import Foundation
public import Logging

/// Everything `cairnd` is told, from its config file, environment and flags (in that order of
/// precedence, last wins). Every field has a documented default; the keys of the config file
/// are given in brackets and documented in `client-config/cairnd.conf`. Fields marked "sync"
/// are read by CairnSync, not by the socket server.
public struct DaemonConfiguration: Sendable, Hashable {
    /// Repository base URLs, tried in order (sync). [`source`, repeatable] Default none.
    public var sources: [String]
    /// The channel to follow (sync). [`channel`] Default "stable".
    public var channel: String
    /// Publisher public key files to pin (sync). [`trusted_key`, repeatable] Default none.
    public var trustedKeys: [String]
    /// The root file the device was provisioned with (sync); the device then follows the
    /// repository's root chain (protocol/root.md). Exclusive with `trustedKeys`. [`trusted_root`]
    /// Default none.
    public var trustedRoot: String?
    /// An expired manifest newer than the installed version: `install` (flagged) or `refuse`
    /// (sync). [`expired_updates`] Default install.
    public var expiredUpdates: String = "install"
    /// The most bytes the channel's versions, models and staging may hold (sync); the previous
    /// version is kept for rollback only while an install fits. [`max_disk_bytes`, bytes or
    /// with a K, M, G or T suffix (powers of 1024)] Default none.
    public var maxDiskBytes: Int64?
    /// After a full install, an index at least this large is copied in the background to a spare
    /// that the next delta applies to in place instead of copying the live index then; only
    /// within `max_disk_bytes` and the free space (sync). [`spare_index_min_bytes`, bytes with
    /// an optional K, M, G or T suffix, or `never`] Default 256M.
    public var spareIndexMinimumBytes: Int64? = 256 << 20
    /// A full snapshot's index at least this large is written and checked around the page cache
    /// (direct I/O), so that it does not push the serving version's pages out; a smaller one
    /// goes through the cache, and its check reads it from memory (sync).
    /// [`direct_install_min_bytes`, bytes with an optional K, M, G or T suffix, or `never`]
    /// Default 64M.
    public var directInstallMinimumBytes: Int64? = 64 << 20
    /// Files for private sources (sync): netrc, bearer token, CA bundle, client certificate and
    /// key, for every source [`netrc_file`, `token_file`, `ca_bundle`, `client_cert`,
    /// `client_key`] and per source (the same keys in a `[source URL]` section, which win).
    public var sourceAccess: [String: SourceAccess] = [:]
    public var defaultSourceAccess = SourceAccess.none
    /// Further channels, each with its own sources, trust and schedule, synced and installed on
    /// its own in `DIR/channels/<name>` (`[channel NAME]` sections). Default none.
    public var extraChannels: [ChannelSettings] = []
    /// How searches rank; of its fields, the config file sets when dense search narrows the rows
    /// by their signs [`approximate_dense_above`, rows; 0 always, `never` never], the share it
    /// keeps [`dense_shortlist`, a fraction in (0, 1]], when lexical search scores only the
    /// rows of its rarest tokens [`approximate_lexical_above`, rows; 0 always, `never` never] and
    /// when, above that, it scores every row from FTS5's postings instead, by the rows its words
    /// are in together [`lexical_postings_above`, rows; 0 always, `never` never]. Defaults 50000,
    /// 0.03, 50000 and a fifth of the index's rows.
    public var ranking = RankingConfiguration()
    /// Installed versions and state. [`data_dir`] Default "/var/lib/cairn".
    public var dataDirectory: String
    /// The Unix socket of the query API. [`socket`] Default "/run/cairn/cairnd.sock".
    public var socketPath: String
    /// Seconds between polls (sync). [`poll_interval`] Default 300.
    public var pollInterval: Double
    /// Shortest and longest wait after a failed sync, doubling in between (sync).
    /// [`backoff_min`, `backoff_max`, seconds] Default 30 and 3600.
    public var backoffMinimum: Double = 30
    public var backoffMaximum: Double = 3600
    /// Requested attempts (`POST /v1/sync`, SIGHUP) start five at once, then one per this many
    /// seconds, per channel (sync). 0: no limit. [`sync_request_interval`] Default 10.
    public var syncRequestInterval: Double = 10
    /// Seconds a download may run below 1 KiB/s (half of `bandwidth_cap` when lower) before the
    /// source counts as stalled and the next one is tried (sync). [`stall_timeout`] Default 30.
    public var stallTimeout: Double = 30
    /// A blob download that receives less than this many bytes per second over
    /// `slowSourceWindow`, while a later source remains, goes on from that source, which resumes
    /// it; the slow source is asked again last, uncut (sync). 0: never. [`slow_source_rate`]
    /// Default 16384.
    public var slowSourceRate = 16 << 10
    /// Seconds `slowSourceRate` is measured over. [`slow_source_window`] Default 120.
    public var slowSourceWindow: Double = 120
    /// Seconds after SIGTERM or SIGINT by which cairnd has exited: work still running then (an
    /// install's check) is cut, and done again at the next start. Below the service manager's
    /// stop timeout (the unit's `TimeoutStopSec=30`). [`stop_timeout`] Default 20.
    public var stopTimeout: Double = 20
    /// Download speed cap in bytes per second, nil for none (sync). [`bandwidth_cap`] Default none.
    public var bandwidthCap: Int64?
    /// File mode of the socket. [`socket_mode`, octal] Default 0o660.
    public var socketMode: UInt32
    /// Group of the socket, by name; nil keeps the process's group. [`socket_group`] Default nil.
    public var socketGroup: String?
    /// The group whose members may also roll back (not export), by name (its members as the
    /// group database lists them); nil: only cairnd's user and root. [`operator_group`] Default nil.
    public var operatorGroup: String?
    /// [`log_level`: trace, debug, info, notice, warning, error, critical] Default info.
    public var logLevel: Logger.Level
    /// The config file's lines whose key this build does not know (`config line 12:
    /// stop_timeout`): skipped, and logged once the log is set up (a newer cairnd's setting).
    public var ignoredKeys: [String] = []
    /// Searches that run at once, each on a thread of the search pool. [`max_concurrent_queries`]
    /// Default 2 × active processors.
    public var maxConcurrentQueries: Int
    /// Searches that may wait for a slot; beyond that 503 `busy`. [`max_queued_queries`]
    /// Default 4 × `maxConcurrentQueries`.
    public var maxQueuedQueries: Int {
        get { queuedQueries ?? 4 * maxConcurrentQueries }
        set { queuedQueries = newValue }
    }
    /// `max_queued_queries` when set; else the queue follows `maxConcurrentQueries` as set.
    private var queuedQueries: Int?
    /// Largest accepted request body. [`max_body_bytes`] Default 65536.
    public var maxBodyBytes: Int
    /// Open connections at most; more wait in the listen backlog. [`max_connections`] Default 256.
    public var maxConnections: Int
    /// Seconds a connection may sit without a complete request part. [`idle_timeout`] Default 30.
    public var idleTimeout: Double

    public static let defaultConfigurationFile = CairndConfigFile.defaultPath
    public static let defaultSocketPath = CairndConfigFile.defaultSocketPath

    public init(sources: [String] = [], channel: String = "stable", trustedKeys: [String] = [],
                dataDirectory: String = "/var/lib/cairn", socketPath: String = DaemonConfiguration.defaultSocketPath,
                pollInterval: Double = 300, socketMode: UInt32 = 0o660, socketGroup: String? = nil,
                logLevel: Logger.Level = .info, maxConcurrentQueries: Int? = nil, maxQueuedQueries: Int? = nil,
                maxBodyBytes: Int = 65_536, maxConnections: Int = 256, idleTimeout: Double = 30) {
        self.sources = sources
        self.channel = channel
        self.trustedKeys = trustedKeys
        self.dataDirectory = dataDirectory
        self.socketPath = socketPath
        self.pollInterval = pollInterval
        self.socketMode = socketMode
        self.socketGroup = socketGroup
        self.logLevel = logLevel
        let concurrent = maxConcurrentQueries ?? 2 * max(1, ProcessInfo.processInfo.activeProcessorCount)
        self.maxConcurrentQueries = concurrent
        self.queuedQueries = maxQueuedQueries
        self.maxBodyBytes = maxBodyBytes
        self.maxConnections = maxConnections
        self.idleTimeout = idleTimeout
    }
}

/// One `[channel NAME]` section: what differs from the daemon's own channel.
public struct ChannelSettings: Sendable, Hashable {
    public var name: String
    public var sources: [String] = []
    public var trustedKeys: [String] = []
    public var trustedRoot: String?
    public var pollInterval: Double?
    public var expiredUpdates: String?
    public var maxDiskBytes: Int64?

    public init(name: String) { self.name = name }
}
