public import CairnCore
public import Foundation

/// What `state.json` holds (protocol/data-directory.md). Every field is optional on disk.
public struct SyncState: Codable, Sendable, Equatable {
    /// The last refusal or failure, one line.
    public struct LastError: Codable, Sendable, Equatable {
        public var code: String
        public var message: String
        public var at: String
    }

    /// How one source has been doing.
    public struct SourceHealth: Codable, Sendable, Equatable {
        public var url: String
        public var lastOK: String?
        public var lastFailure: String?
        public var consecutiveFailures: Int
        /// The ETag of the manifest last found installed (sent as If-None-Match).
        public var etag: String?
        public var lastError: String?
        /// When a blob it served last failed its SHA-256; cleared when a version installs from
        /// it. Such a source is tried last for a day (`Syncer.order`).
        public var lastHashMismatch: String?

        public init(url: String) {
            self.url = url
            consecutiveFailures = 0
        }

        enum CodingKeys: String, CodingKey {
            case url, etag
            case lastOK = "last_ok", lastFailure = "last_failure"
            case consecutiveFailures = "consecutive_failures", lastError = "last_error"
            case lastHashMismatch = "last_hash_mismatch"
        }
    }

    public var installedVersion: Int?
    public var installedStateRoot: String?
    public var lastAttempt: String?
    public var lastAttemptReachedSource: Bool?
    public var lastSuccess: String?
    public var lastCheck: String?
    public var lastError: LastError?
    public var highestVersionSeen: Int?
    /// The version `cairn rollback` rolled back from: sync installs only newer ones.
    public var heldBackVersion: Int?
    /// The signing keys (key ids, hex) whose signatures on `heldBackVersion` verified under the
    /// newest root at the rollback: a root step that removes them all lifts the hold (a thief's
    /// version). Nil on a device pinned to keys, or in a state written before it was recorded.
    public var heldBackSigners: [String]?
    public var attempts: Int?
    public var sources: [SourceHealth]?
    /// The device never believes it is earlier than this (protocol/root.md, "Clock floor").
    public var clockFloor: String?
    /// The installed version that no signing key of the trusted root signed: its rollback floor
    /// is lifted until a version installed serves (protocol/root.md, "fast-forward recovery").
    public var recoveringFrom: Int?
    /// While recovering: the `created` of the first root under which the installed version
    /// stopped counting. A manifest made before it is refused (a stale mirror's).
    public var recoveringSince: String?
    /// The newest root of the last walk whose removals of signing keys were applied
    /// (`Syncer.signingPolicy`): the next walk compares against it, so that one whose state was
    /// never written (a kill before the attempt's end; roots are written as accepted) is
    /// applied again.
    public var revokedThroughRoot: Int?
    /// Expired-but-newer manifests installed under `expired_updates = install`.
    public var expiredInstalls: Int?
    /// The last previous version removed to make room for an install (`max_disk_bytes` or a
    /// full disk), kept after a later previous version is (protocol/data-directory.md): `cairn
    /// status` says it only while no previous version is kept.
    public var previousDropped: Int?
    /// The version that was installed until it could not be served and nothing before it could
    /// (its `current` dropped): while nothing is installed it is the rollback floor, so that a
    /// source cannot hand the device an older version (protocol/data-directory.md).
    public var forgottenVersion: Int?
    public var forgottenStateRoot: String?

    public init() {}

    enum CodingKeys: String, CodingKey {
        case installedVersion = "installed_version", installedStateRoot = "installed_state_root"
        case lastAttempt = "last_attempt", lastAttemptReachedSource = "last_attempt_reached_source"
        case lastSuccess = "last_success", lastCheck = "last_check", lastError = "last_error"
        case highestVersionSeen = "highest_version_seen", heldBackVersion = "held_back_version"
        case heldBackSigners = "held_back_signers", attempts, sources
        case clockFloor = "clock_floor", recoveringFrom = "recovering_from", recoveringSince = "recovering_since"
        case revokedThroughRoot = "revoked_through_root"
        case expiredInstalls = "expired_installs"
        case previousDropped = "previous_dropped"
        case forgottenVersion = "forgotten_version", forgottenStateRoot = "forgotten_state_root"
    }

    /// Reads each field on its own: one that does not decode (a hand edit, another cairnd's
    /// shape) is left out, and the others are kept. A floor (`clock_floor`,
    /// `held_back_version`, `forgotten_version`…) must not be lost to a neighbour's damage.
    /// `DataDirectory.readState` says which were left out.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func field<T: Decodable>(_ key: CodingKeys) -> T? { (try? c.decodeIfPresent(T.self, forKey: key)) ?? nil }
        installedVersion = field(.installedVersion)
        installedStateRoot = field(.installedStateRoot)
        lastAttempt = field(.lastAttempt)
        lastAttemptReachedSource = field(.lastAttemptReachedSource)
        lastSuccess = field(.lastSuccess)
        lastCheck = field(.lastCheck)
        lastError = field(.lastError)
        highestVersionSeen = field(.highestVersionSeen)
        heldBackVersion = field(.heldBackVersion)
        heldBackSigners = field(.heldBackSigners)
        attempts = field(.attempts)
        // Source by source: one entry that does not read leaves the others.
        if let entries: [LossySourceHealth] = field(.sources) { sources = entries.compactMap(\.health) }
        clockFloor = field(.clockFloor)
        recoveringFrom = field(.recoveringFrom)
        recoveringSince = field(.recoveringSince)
        revokedThroughRoot = field(.revokedThroughRoot)
        expiredInstalls = field(.expiredInstalls)
        previousDropped = field(.previousDropped)
        forgottenVersion = field(.forgottenVersion)
        forgottenStateRoot = field(.forgottenStateRoot)
    }

    /// One `sources` entry, or nil when it does not decode.
    private struct LossySourceHealth: Decodable {
        let health: SourceHealth?
        init(from decoder: any Decoder) { health = try? SourceHealth(from: decoder) }
    }

    /// This state without what every attempt moves: when it ran and checked and how many ran
    /// (`last_attempt`, `attempts`, `last_check`, each source's `last_ok` and `last_failure`),
    /// how many failures in a row past the first, and an error's wording and time where its
    /// code stays (libcurl's words carry the milliseconds waited). Two states alike here differ
    /// by routine alone (`Syncer.persist`).
    var routineBlanked: SyncState {
        var blanked = self
        (blanked.lastAttempt, blanked.attempts, blanked.lastCheck) = (nil, nil, nil)
        blanked.lastError = lastError.map { LastError(code: $0.code, message: "", at: "") }
        blanked.sources = sources?.map {
            var health = $0
            (health.lastOK, health.lastFailure) = (nil, nil)
            health.consecutiveFailures = min(health.consecutiveFailures, 1)
            health.lastError = health.lastError.map { String($0.prefix { $0 != ":" }) }
            return health
        }
        return blanked
    }

    /// Ends fast-forward recovery.
    mutating func endRecovery() { (recoveringFrom, recoveringSince) = (nil, nil) }

    /// Forgets the held-back version and its signers.
    mutating func liftHold() { (heldBackVersion, heldBackSigners) = (nil, nil) }

    /// Records `version` (nil: none) as the installed one. Nothing replacing an installed
    /// version makes that one the floor (`forgotten_version`); a version installing clears it.
    mutating func setInstalled(_ version: InstalledVersion?) {
        if version == nil, let was = installedVersion, was >= (forgottenVersion ?? 0) {
            (forgottenVersion, forgottenStateRoot) = (was, installedStateRoot)
        } else if version != nil {
            (forgottenVersion, forgottenStateRoot) = (nil, nil)
        }
        installedVersion = version?.version
        installedStateRoot = version?.stateRoot.hex
    }

    /// The floor while nothing is installed: the forgotten version and its state root.
    var forgotten: (version: Int, stateRoot: ContentID?)? {
        forgottenVersion.map { ($0, forgottenStateRoot.flatMap { ContentID(hex: $0) }) }
    }

    /// Drops every source's ETag: the installed version is no longer the one the manifests
    /// they name were found installed with (a fall back to the previous version), so the next
    /// attempt fetches each manifest whole instead of taking "not modified" for "up to date".
    mutating func forgetManifestETags() {
        sources = sources.map { $0.map { var health = $0; health.etag = nil; return health } }
    }

    /// The health entry for `url`, created when missing.
    mutating func withSource(_ url: String, _ change: (inout SourceHealth) -> Void) {
        var list = sources ?? []
        if let index = list.firstIndex(where: { $0.url == url }) {
            change(&list[index])
        } else {
            var entry = SourceHealth(url: url)
            change(&entry)
            list.append(entry)
        }
        sources = list
    }

    func source(_ url: String) -> SourceHealth? { sources?.first { $0.url == url } }

    /// The clock every expiry rule uses: `max(now, clock_floor)`.
    public func effectiveNow(_ now: Date) -> Timestamp {
        let wall = Timestamp(clamping: now)
        guard let floor = clockFloor.flatMap(Timestamp.init(rfc3339:)) else { return wall }
        return max(wall, floor)
    }

    /// Raises `clock_floor` to `time` when it is later.
    mutating func raiseClockFloor(to time: Timestamp) {
        if let floor = clockFloor.flatMap(Timestamp.init(rfc3339:)), floor >= time { return }
        clockFloor = time.rfc3339
    }

    public static func time(_ date: Date) -> String { Timestamp(clamping: date).rfc3339 }
}
