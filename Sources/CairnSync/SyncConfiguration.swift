public import CairnCore
public import CairnIndex

/// Everything the syncer and its poll loop need. Every field but `sources`, `channel`,
/// `trustedKeys` and `dataDirectory` has a documented default.
public struct SyncConfiguration: Sendable {
    /// Base URLs of repository copies (`https://…`, `http://…`, `file:///media/usb/repo`), tried
    /// in order; the first that yields a verified answer ends an attempt.
    public var sources: [String]
    /// The channel to follow.
    public var channel: String
    /// Publisher keys to accept signatures from (threshold 1), when no root is pinned.
    public var trustedKeys: [PublicKey]
    /// The bytes of the pinned root file (protocol/root.md), checked with
    /// `SignedRoot.verifySelfSigned`; when set, the device follows the repository's root chain
    /// from it and `trustedKeys` is not used.
    public var trustedRoot: [UInt8]?
    /// Credentials and TLS files for every source (`defaultAccess`) and per source URL (`access`,
    /// keyed without a trailing `/`; its set fields win).
    public var defaultAccess = SourceAccess.none
    public var access: [String: SourceAccess] = [:]
    /// What to do with a verified manifest that is expired but newer than the installed version.
    /// Default `.install` (flagged).
    public var expiredUpdates: ExpiredUpdatePolicy = .install
    /// The device data directory (protocol/data-directory.md).
    public var dataDirectory: String
    /// Time between polls. Default 900 s; each wait is jittered by ±10 %.
    public var pollInterval: Duration
    /// First wait after a failed attempt. Default 30 s; doubles per failure.
    public var backoffMinimum: Duration
    /// Longest wait after failures. Default 3600 s.
    public var backoffMaximum: Duration
    /// Requested attempts (`SyncService.requestSync()`) start `requestBurst` at once, then one
    /// per this long; polls on the schedule do not count. Zero: no limit. Default 10 s.
    public var requestInterval: Duration = .seconds(10)
    /// How many requested attempts start at once before `requestInterval` spaces them.
    public static let requestBurst = 5
    /// Status turns stale when no check succeeded within this many poll intervals. Default 3.
    public var staleAfterPolls: Int
    /// Missed polls after which the installed version counts as stale. Default 3.
    public static let defaultStaleAfterPolls = 3
    /// Transfer limits.
    public var transfer: TransferLimits
    /// Bytes kept free beyond what an install needs. Default 64 MiB.
    public var freeSpaceMargin: Int64
    /// The most bytes the channel's versions, models and staging may hold, nil for no limit: an
    /// install that would pass it removes the previous version first (no rollback until the
    /// next install), and is refused (`disk_budget`) if the new version still does not fit
    /// beside the live one. Default none.
    public var maxDiskBytes: Int64?
    /// After a full install, an index of at least this many bytes is copied, in the background,
    /// to a spare that the next delta applies to in place (otherwise that delta copies the live
    /// index first: seconds at a million chunks); only when the copy fits `maxDiskBytes` and the
    /// free space. Nil never keeps one. Default 256 MiB.
    public var spareIndexMinimumBytes: Int64? = 256 << 20
    /// The data directories of the daemon's other channels (on the same disk, as a rule): an
    /// install short of free space removes their spare copies too before it gives up its own
    /// rollback target, as a spare only saves time. Default none.
    public var otherChannelDirectories: [String] = []
    /// A full snapshot whose index is at least this many bytes is inflated and checked around
    /// the page cache (direct I/O): its pages would push out the serving version's, and on a
    /// small device they cannot stay cached anyway. A smaller index is written through the
    /// cache, and its check reads it back from memory. 0 always bypasses the cache, nil never.
    /// Default 64 MiB.
    public var directInstallMinimumBytes: Int64? = 64 << 20
    /// How the device ranks (the daemon's): canaries run as the installed version will answer.
    /// Default `RankingConfiguration()`.
    public var ranking = RankingConfiguration()

    public init(sources: [String], channel: String, trustedKeys: [PublicKey], dataDirectory: String,
                pollInterval: Duration = .seconds(900), backoffMinimum: Duration = .seconds(30),
                backoffMaximum: Duration = .seconds(3600), staleAfterPolls: Int = SyncConfiguration.defaultStaleAfterPolls,
                transfer: TransferLimits = TransferLimits(), freeSpaceMargin: Int64 = 64 << 20) {
        self.sources = sources
        self.channel = channel
        self.trustedKeys = trustedKeys
        self.dataDirectory = dataDirectory
        self.pollInterval = pollInterval
        self.backoffMinimum = backoffMinimum
        self.backoffMaximum = backoffMaximum
        self.staleAfterPolls = staleAfterPolls
        self.transfer = transfer
        self.freeSpaceMargin = freeSpaceMargin
    }
}

extension SyncConfiguration {
    /// The access for the source at `base` (with or without a trailing `/`). Credentials (netrc,
    /// token) go only to `https://` sources: over plain HTTP anyone on the path could read them.
    /// A proxy and its login only to `http(s)://` sources not set to go direct (`proxy = none`):
    /// a stick or a LAN mirror must not fail for a proxy_auth_file it does not use.
    public func access(for base: String) -> SourceAccess {
        let key = SourceAccess.base(of: base)
        var chosen = (access[key] ?? .none).over(defaultAccess)
        if !SourceURL.isHTTPS(base) {
            chosen.netrcFile = nil
            chosen.tokenFile = nil
        }
        if !SourceURL.isHTTP(base) { chosen.proxy = nil }
        // Kept for a proxy the environment names (`proxy` unset): libcurl sends the login only
        // to a proxy it uses.
        if chosen.proxy == "" || !SourceURL.isHTTP(base) {
            chosen.proxyAuthFile = nil
            chosen.proxyCABundle = nil
        }
        return chosen
    }
}

/// `expired_updates` (protocol/root.md, "Time on devices without a trustworthy clock").
public enum ExpiredUpdatePolicy: String, Sendable, CaseIterable {
    /// Install an expired manifest that is newer than the installed version, flagged `expired`.
    case install
    /// Refuse every expired manifest (`expired`), as TUF does.
    case refuse
}

/// Limits applied to every transfer.
public struct TransferLimits: Sendable {
    /// Seconds to establish a connection. Default 15.
    public var connectTimeout: Int
    /// Seconds a whole transfer may take; 0 means no limit (the low-speed limit still applies).
    /// Default 0, because a large snapshot over a slow link may take hours.
    public var overallTimeout: Int
    /// A transfer slower than this many bytes per second … Default 1024.
    public var lowSpeedBytesPerSecond: Int
    /// … for this many seconds is aborted. Default 30.
    public var lowSpeedSeconds: Int
    /// Redirects followed (http/https only). Default 5.
    public var maxRedirects: Int
    /// Cap on receive speed in bytes per second; nil (default) means none.
    public var bandwidthCap: Int64?
    /// The largest manifest file accepted. Default 1 MiB.
    public var maxManifestBytes: Int
    /// Seconds a manifest or a root file may take, whatever its speed: a few kilobytes, so a
    /// mirror that trickles one just above the low-speed limit does not hold the attempt (and
    /// the sources after it) for many minutes. Default 120; under a `bandwidthCap`, at least
    /// the time 256 KiB takes twice at the cap.
    public var smallFileSeconds = 120
    /// A blob download that receives less than this many bytes per second over a window of
    /// `slowSourceSeconds`, while a later source could take it over, is cut and resumed there
    /// (the partial kept); 0 never cuts. The last source is never cut for it, so the slowest
    /// link still finishes. Default 16 KiB/s (a 1.5 GB snapshot in a day).
    public var slowSourceBytesPerSecond = 16 << 10
    /// The window `slowSourceBytesPerSecond` is measured over, in seconds. Default 120.
    public var slowSourceSeconds = 120

    /// The pace a blob download keeps before a later source takes it over (nil: none): under a
    /// receive cap at most half the cap, or a capped link would leave every source but the last.
    public var effectiveSlowSourceRate: Int64? {
        guard slowSourceBytesPerSecond > 0 else { return nil }
        guard let cap = bandwidthCap else { return Int64(slowSourceBytesPerSecond) }
        return min(Int64(slowSourceBytesPerSecond), max(1, cap / 2))
    }

    /// `smallFileSeconds`, raised under a receive cap so that a large honest manifest passes.
    public var effectiveSmallFileSeconds: Int {
        guard let cap = bandwidthCap, cap > 0 else { return smallFileSeconds }
        return max(smallFileSeconds, Int(min(Int64(Int32.max), 2 * (256 << 10) / cap)))
    }

    public init(connectTimeout: Int = 15, overallTimeout: Int = 0, lowSpeedBytesPerSecond: Int = 1024,
                lowSpeedSeconds: Int = 30, maxRedirects: Int = 5, bandwidthCap: Int64? = nil,
                maxManifestBytes: Int = 1 << 20) {
        self.connectTimeout = connectTimeout
        self.overallTimeout = overallTimeout
        self.lowSpeedBytesPerSecond = lowSpeedBytesPerSecond
        self.lowSpeedSeconds = lowSpeedSeconds
        self.maxRedirects = maxRedirects
        self.bandwidthCap = bandwidthCap
        self.maxManifestBytes = maxManifestBytes
    }

    /// The low-speed limit a transfer runs under: under a receive cap, at most half the cap, or
    /// every transfer capped below the limit would be cut as stalled.
    public var effectiveLowSpeed: Int {
        guard let cap = bandwidthCap else { return lowSpeedBytesPerSecond }
        return Int(min(Int64(lowSpeedBytesPerSecond), max(1, cap / 2)))
    }
}
