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

            public init(url: String, healthy: Bool? = nil, lastSuccess: String? = nil, lastError: String? = nil) {
                self.url = url
                self.healthy = healthy
                self.lastSuccess = lastSuccess
                self.lastError = lastError
            }

            enum CodingKeys: String, CodingKey {
                case url, healthy
                case lastSuccess = "last_success"
                case lastError = "last_error"
            }

            public func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(url, forKey: .url)
                try c.encode(healthy, forKey: .healthy)
                try c.encode(lastSuccess, forKey: .lastSuccess)
                try c.encode(lastError, forKey: .lastError)
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
        }
    }
}
