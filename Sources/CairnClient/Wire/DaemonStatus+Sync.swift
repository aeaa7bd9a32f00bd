extension DaemonStatus {
    /// The sync side's state as the socket API reports it (the `sync` object of `GET /v1/status`,
    /// derived from CairnSync's `DIR/state.json`). Every field may be unknown (nil, JSON
    /// null). Field names are fixed by protocol/socket-api.md.
    public struct Sync: Sendable, Hashable, Codable {
        /// One repository source's health.
        public struct Source: Sendable, Hashable, Codable {
            public var url: String
            public var healthy: Bool?
            public var lastSuccess: String?
            public var lastError: String?
            /// The attempts in a row it failed (0 after one it answered). Added 2026-12-06.
            public var failuresInARow: Int?
            /// The proxy cairnd.conf sets for the source (`none`: direct); nil (absent) when it
            /// sets none, and libcurl's proxy environment applies. Added 2026-12-06.
            public var proxy: String?

            public init(url: String, healthy: Bool? = nil, lastSuccess: String? = nil, lastError: String? = nil,
                        failuresInARow: Int? = nil, proxy: String? = nil) {
                self.url = url
                self.healthy = healthy
                self.lastSuccess = lastSuccess
                self.lastError = lastError
                self.failuresInARow = failuresInARow
                self.proxy = proxy
            }

            enum CodingKeys: String, CodingKey {
                case url, healthy, proxy
                case lastSuccess = "last_success"
                case lastError = "last_error"
                case failuresInARow = "failures_in_a_row"
            }

            public func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(url, forKey: .url)
                try c.encode(healthy, forKey: .healthy)
                try c.encode(lastSuccess, forKey: .lastSuccess)
                try c.encode(lastError, forKey: .lastError)
                try c.encode(failuresInARow, forKey: .failuresInARow)
                try c.encodeIfPresent(proxy, forKey: .proxy)
            }
        }

        /// When the last sync attempt started / last succeeded (RFC 3339, UTC).
        public var lastAttempt: String?
        public var lastSuccess: String?
        /// The last attempt's error, one line; nil after a success.
        public var lastError: String?
        /// Whether the last attempt reached a source.
        public var online: Bool?
        /// Whether the installed version is older than the sync side tolerates (or expired).
        public var stale: Bool?
        public var highestVersionSeen: Int?
        /// The version `cairn rollback` rolled back from; sync installs only newer ones.
        public var heldBackVersion: Int?
        public var sources: [Source]
        /// The stable code of `lastError` (`root_refused`, `threshold_not_met`, …).
        public var lastErrorCode: String?
        /// When a source last answered with a verified manifest (or a 304).
        public var lastCheck: String?
        /// Expired-but-newer versions installed (`expired_updates = install`).
        public var expiredInstalls: Int?
        // Reported at the top level of the status (`DaemonStatus`), not in `sync`:
        /// Whether the installed manifest is past its `expires` (at `max(clock, clock_floor)`).
        public var expired: Bool?
        /// The installed manifest's `expires`.
        public var expires: String?
        /// The installed manifest's `created`: how old the knowledge that answers is.
        public var published: String?
        /// The device never believes it is earlier than this (protocol/root.md).
        public var clockFloor: String?
        /// What the device trusts: a root and its thresholds, or pinned keys.
        public var trust: Trust?
        /// The attempt in progress; nil between attempts.
        public var progress: Progress?
        /// Attempts started and ended since cairnd started (numbered from 1), and the outcome of
        /// the last one ended: `installed`, `up_to_date` or its error code.
        public var attemptsStarted: Int?
        public var attemptsFinished: Int?
        public var lastOutcome: String?
        /// The version `cairn rollback` would go back to; nil when none is kept.
        public var previousVersion: Int?
        /// The last previous version removed to make room for an install.
        public var previousDropped: Int?
        /// A version a newer cairnd installed, kept (`DIR/newer`) for the upgrade back; nil for none.
        public var newerVersion: Int?
        /// The channel's disk budget (`max_disk_bytes`), nil for none.
        public var maxDiskBytes: Int64?
        /// The installed version's spare copy of its index: `ready`, `copying` or `declined`;
        /// nil when there is none to keep.
        public var spare: String?
        /// The export or rollback running now (an attempt asked for meanwhile waits for it);
        /// nil when none runs (since 2026-12-06).
        public var operation: Operation?
        /// When a requested attempt that waits for the request allowance (`sync_request_interval`)
        /// starts; nil when none waits (since 2026-12-07).
        public var requestHeldUntil: String?

        public init(lastAttempt: String? = nil, lastSuccess: String? = nil, lastError: String? = nil,
                    online: Bool? = nil, stale: Bool? = nil, highestVersionSeen: Int? = nil, heldBackVersion: Int? = nil,
                    sources: [Source] = []) {
            self.lastAttempt = lastAttempt
            self.lastSuccess = lastSuccess
            self.lastError = lastError
            self.online = online
            self.stale = stale
            self.highestVersionSeen = highestVersionSeen
            self.heldBackVersion = heldBackVersion
            self.sources = sources
        }

        enum CodingKeys: String, CodingKey {
            case lastAttempt = "last_attempt", lastSuccess = "last_success", lastError = "last_error"
            case online, stale
            case highestVersionSeen = "highest_version_seen", heldBackVersion = "held_back_version"
            case sources
            case lastErrorCode = "last_error_code", expiredInstalls = "expired_installs", lastCheck = "last_check"
            case progress, attemptsStarted = "attempts_started", attemptsFinished = "attempts_finished", lastOutcome = "last_outcome"
            case previousVersion = "previous_version", previousDropped = "previous_dropped", maxDiskBytes = "max_disk_bytes", spare
            case newerVersion = "newer_version"
            case operation
            case requestHeldUntil = "request_held_until"
        }

        /// Lenient: absent keys are unknown, unknown keys are ignored.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            lastAttempt = try? c.decodeIfPresent(String.self, forKey: .lastAttempt)
            lastSuccess = try? c.decodeIfPresent(String.self, forKey: .lastSuccess)
            lastError = try? c.decodeIfPresent(String.self, forKey: .lastError)
            online = try? c.decodeIfPresent(Bool.self, forKey: .online)
            stale = try? c.decodeIfPresent(Bool.self, forKey: .stale)
            highestVersionSeen = try? c.decodeIfPresent(Int.self, forKey: .highestVersionSeen)
            heldBackVersion = try? c.decodeIfPresent(Int.self, forKey: .heldBackVersion)
            sources = (try? c.decodeIfPresent([Source].self, forKey: .sources)) ?? []
            lastErrorCode = try? c.decodeIfPresent(String.self, forKey: .lastErrorCode)
            expiredInstalls = try? c.decodeIfPresent(Int.self, forKey: .expiredInstalls)
            lastCheck = try? c.decodeIfPresent(String.self, forKey: .lastCheck)
            progress = try? c.decodeIfPresent(Progress.self, forKey: .progress)
            attemptsStarted = try? c.decodeIfPresent(Int.self, forKey: .attemptsStarted)
            attemptsFinished = try? c.decodeIfPresent(Int.self, forKey: .attemptsFinished)
            lastOutcome = try? c.decodeIfPresent(String.self, forKey: .lastOutcome)
            previousVersion = try? c.decodeIfPresent(Int.self, forKey: .previousVersion)
            previousDropped = try? c.decodeIfPresent(Int.self, forKey: .previousDropped)
            newerVersion = try? c.decodeIfPresent(Int.self, forKey: .newerVersion)
            maxDiskBytes = try? c.decodeIfPresent(Int64.self, forKey: .maxDiskBytes)
            spare = try? c.decodeIfPresent(String.self, forKey: .spare)
            operation = try? c.decodeIfPresent(Operation.self, forKey: .operation)
            requestHeldUntil = try? c.decodeIfPresent(String.self, forKey: .requestHeldUntil)
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(lastAttempt, forKey: .lastAttempt)
            try c.encode(lastSuccess, forKey: .lastSuccess)
            try c.encode(lastError, forKey: .lastError)
            try c.encode(online, forKey: .online)
            try c.encode(stale, forKey: .stale)
            try c.encode(highestVersionSeen, forKey: .highestVersionSeen)
            try c.encode(heldBackVersion, forKey: .heldBackVersion)
            try c.encode(sources, forKey: .sources)
            try c.encode(lastErrorCode, forKey: .lastErrorCode)
            try c.encode(expiredInstalls, forKey: .expiredInstalls)
            try c.encode(lastCheck, forKey: .lastCheck)
            try c.encode(progress, forKey: .progress)
            try c.encode(attemptsStarted, forKey: .attemptsStarted)
            try c.encode(attemptsFinished, forKey: .attemptsFinished)
            try c.encode(lastOutcome, forKey: .lastOutcome)
            try c.encode(previousVersion, forKey: .previousVersion)
            try c.encode(previousDropped, forKey: .previousDropped)
            try c.encodeIfPresent(newerVersion, forKey: .newerVersion)
            try c.encode(maxDiskBytes, forKey: .maxDiskBytes)
            try c.encode(spare, forKey: .spare)
            try c.encode(operation, forKey: .operation)
            try c.encode(requestHeldUntil, forKey: .requestHeldUntil)
        }
    }

    /// An export or rollback in progress: `kind` (`export` or `rollback`) and when it started
    /// (RFC 3339, UTC).
    public struct Operation: Sendable, Hashable, Codable {
        public var kind: String
        public var started: String

        public init(kind: String, started: String) {
            (self.kind, self.started) = (kind, started)
        }
    }

    /// A sync attempt in progress (the `progress` object of `sync`, protocol/socket-api.md).
    public struct Progress: Sendable, Hashable, Codable {
        /// Its number (attempts count from 1 at each start of cairnd).
        public var attempt: Int
        /// `checking`, `downloading` or `installing`.
        public var phase: String
        /// The version being installed; nil while checking.
        public var version: Int?
        public var bytesDone: Int64
        /// What the attempt expects to download; nil while checking.
        public var bytesTotal: Int64?
        public var bytesPerSecond: Double?
        public var etaSeconds: Double?
        /// When the attempt started (RFC 3339, UTC).
        public var started: String
        /// The source the attempt is asking now, as configured (since 2026-12-06; nil before
        /// the first, or from an older cairnd).
        public var source: String?
        /// What the attempt waits for other than a source (another channel's download of the same
        /// model; since 2026-12-07); nil when it does not wait, or from an older cairnd.
        public var waiting: String?

        public init(attempt: Int, phase: String, version: Int?, bytesDone: Int64, bytesTotal: Int64?,
                    bytesPerSecond: Double?, etaSeconds: Double?, started: String, source: String? = nil, waiting: String? = nil) {
            self.attempt = attempt
            self.phase = phase
            self.version = version
            self.bytesDone = bytesDone
            self.bytesTotal = bytesTotal
            self.bytesPerSecond = bytesPerSecond
            self.etaSeconds = etaSeconds
            self.started = started
            self.source = source
            self.waiting = waiting
        }

        enum CodingKeys: String, CodingKey {
            case attempt, phase, version, started, source, waiting
            case bytesDone = "bytes_done", bytesTotal = "bytes_total", bytesPerSecond = "bytes_per_second", etaSeconds = "eta_seconds"
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(attempt, forKey: .attempt)
            try c.encode(phase, forKey: .phase)
            try c.encode(version, forKey: .version)
            try c.encode(bytesDone, forKey: .bytesDone)
            try c.encode(bytesTotal, forKey: .bytesTotal)
            try c.encode(bytesPerSecond, forKey: .bytesPerSecond)
            try c.encode(etaSeconds, forKey: .etaSeconds)
            try c.encode(started, forKey: .started)
            try c.encode(source, forKey: .source)
            try c.encode(waiting, forKey: .waiting)
        }
    }

    /// What a device trusts (the `trust` object of `GET /v1/status`, protocol/socket-api.md).
    public struct Trust: Sendable, Hashable, Codable {
        /// `root` (a pinned root, followed through rotations) or `keys` (pinned keys).
        public var mode: String
        public var rootVersion: Int?
        public var rootExpires: String?
        public var rootExpired: Bool?
        public var signingThreshold: Int
        /// Key ids of the keys that may sign manifests.
        public var signingKeys: [String]
        /// Fast-forward recovery: the installed version was signed only by revoked keys.
        public var recovering: Bool
        public var recoveringFrom: Int?

        public init(mode: String, rootVersion: Int? = nil, rootExpires: String? = nil, rootExpired: Bool? = nil,
                    signingThreshold: Int, signingKeys: [String], recovering: Bool = false, recoveringFrom: Int? = nil) {
            self.mode = mode
            self.rootVersion = rootVersion
            self.rootExpires = rootExpires
            self.rootExpired = rootExpired
            self.signingThreshold = signingThreshold
            self.signingKeys = signingKeys
            self.recovering = recovering
            self.recoveringFrom = recoveringFrom
        }

        enum CodingKeys: String, CodingKey {
            case mode, recovering
            case rootVersion = "root_version", rootExpires = "root_expires", rootExpired = "root_expired"
            case signingThreshold = "signing_threshold", signingKeys = "signing_keys", recoveringFrom = "recovering_from"
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(mode, forKey: .mode)
            try c.encode(rootVersion, forKey: .rootVersion)
            try c.encode(rootExpires, forKey: .rootExpires)
            try c.encode(rootExpired, forKey: .rootExpired)
            try c.encode(signingThreshold, forKey: .signingThreshold)
            try c.encode(signingKeys, forKey: .signingKeys)
            try c.encode(recovering, forKey: .recovering)
            try c.encode(recoveringFrom, forKey: .recoveringFrom)
        }
    }
}
