/// The body of `GET /v1/status` (protocol/socket-api.md). Version fields are nil before the
/// first install.
public struct DaemonStatus: Sendable, Hashable, Codable {
    public var installed: Bool
    public var version: Int?
    public var stateRoot: String?
    public var channel: String?
    public var chunkCount: Int?
    public var modelID: String?
    public var dimension: Int?
    public var modelLoaded: Bool
    public var lexicalOnly: Bool
    /// "flat" or "narrowed": how unfiltered dense queries are answered (nil without an index).
    public var denseSearch: String?
    /// How the served version's rows files were opened and what its overlay holds (nil without
    /// an index).
    public var rows: Rows?
    /// Why no version answers although one is installed (it cannot be opened now: a full
    /// disk); nil otherwise.
    public var notServing: String?
    public var dataDirectory: String
    public var dataDirectoryBytes: Int64
    public var syncAvailable: Bool
    public var sync: Sync
    /// Every channel the daemon follows, its own first: version and sync state each.
    public var channels: [ChannelState]?
    /// The daemon's build (`CairnVersion.date`; nil from a cairnd before 2026-12-06).
    public var software: String?

    /// The served version's rows files (protocol/data-directory.md, "Rows files").
    public struct Rows: Sendable, Hashable, Codable {
        /// "rows_files" (mapped as they are: no row read) or "scanned" (none were there for this
        /// version: a pass over the rows wrote them).
        public var source: String
        /// Rows in the overlay beside the base, and base rows it removed (0 after a full install).
        public var overlayRows: Int
        public var removedRows: Int

        public init(source: String, overlayRows: Int, removedRows: Int) {
            (self.source, self.overlayRows, self.removedRows) = (source, overlayRows, removedRows)
        }

        enum CodingKeys: String, CodingKey {
            case source
            case overlayRows = "overlay_rows", removedRows = "removed_rows"
        }
    }

    /// One followed channel in the status.
    public struct ChannelState: Sendable, Hashable, Codable {
        public var channel: String
        public var version: Int?
        public var stateRoot: String?
        public var online: Bool?
        public var stale: Bool?
        public var expired: Bool?
        /// When the publisher made the channel's installed version (its manifest's `created`).
        public var published: String?
        public var lastAttempt: String?
        public var lastSuccess: String?
        public var lastError: String?
        public var lastErrorCode: String?
        public var trust: Trust?
        /// The channel's attempt in progress, attempts ended since cairnd started, and the last
        /// one's outcome (as in `sync`).
        public var progress: Progress?
        public var attemptsFinished: Int?
        public var lastOutcome: String?
        /// The channel's export or rollback in progress (as in `sync`).
        public var operation: Operation?
        /// When the channel's requested attempt that waits for the request allowance starts (as in `sync`).
        public var requestHeldUntil: String?

        public init(channel: String, serving version: Int?, stateRoot: String?, sync: Sync) {
            self.channel = channel
            self.version = version
            self.stateRoot = stateRoot
            online = sync.online
            stale = sync.stale
            expired = sync.expired
            published = sync.published
            lastAttempt = sync.lastAttempt
            lastSuccess = sync.lastSuccess
            lastError = sync.lastError
            lastErrorCode = sync.lastErrorCode
            trust = sync.trust
            progress = sync.progress
            attemptsFinished = sync.attemptsFinished
            lastOutcome = sync.lastOutcome
            operation = sync.operation
            requestHeldUntil = sync.requestHeldUntil
        }

        enum CodingKeys: String, CodingKey {
            case channel, version, online, stale, expired, published, trust, progress, operation
            case stateRoot = "state_root", lastAttempt = "last_attempt", lastSuccess = "last_success"
            case lastError = "last_error", lastErrorCode = "last_error_code"
            case attemptsFinished = "attempts_finished", lastOutcome = "last_outcome"
            case requestHeldUntil = "request_held_until"
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(channel, forKey: .channel)
            try c.encode(version, forKey: .version)
            try c.encode(stateRoot, forKey: .stateRoot)
            try c.encode(online, forKey: .online)
            try c.encode(stale, forKey: .stale)
            try c.encode(expired, forKey: .expired)
            try c.encode(published, forKey: .published)
            try c.encode(lastAttempt, forKey: .lastAttempt)
            try c.encode(lastSuccess, forKey: .lastSuccess)
            try c.encode(lastError, forKey: .lastError)
            try c.encode(lastErrorCode, forKey: .lastErrorCode)
            try c.encode(trust, forKey: .trust)
            try c.encode(progress, forKey: .progress)
            try c.encode(attemptsFinished, forKey: .attemptsFinished)
            try c.encode(lastOutcome, forKey: .lastOutcome)
            try c.encode(operation, forKey: .operation)
            try c.encode(requestHeldUntil, forKey: .requestHeldUntil)
        }
    }

    public init(installed: Bool, version: Int? = nil, stateRoot: String? = nil, channel: String? = nil,
                chunkCount: Int? = nil, modelID: String? = nil, dimension: Int? = nil, modelLoaded: Bool,
                lexicalOnly: Bool, dataDirectory: String, dataDirectoryBytes: Int64, syncAvailable: Bool, sync: Sync) {
        self.installed = installed
        self.version = version
        self.stateRoot = stateRoot
        self.channel = channel
        self.chunkCount = chunkCount
        self.modelID = modelID
        self.dimension = dimension
        self.modelLoaded = modelLoaded
        self.lexicalOnly = lexicalOnly
        self.dataDirectory = dataDirectory
        self.dataDirectoryBytes = dataDirectoryBytes
        self.syncAvailable = syncAvailable
        self.sync = sync
    }

    enum CodingKeys: String, CodingKey {
        case installed, version, channel, dimension, sync, channels, rows, software
        case notServing = "not_serving"
        case stateRoot = "state_root", chunkCount = "chunk_count", modelID = "model_id"
        case modelLoaded = "model_loaded", lexicalOnly = "lexical_only", denseSearch = "dense_search"
        case dataDirectory = "data_dir", dataDirectoryBytes = "data_dir_bytes", syncAvailable = "sync_available"
    }

    /// The freshness and trust fields, top-level in the body but kept in `sync` here.
    enum FreshnessKeys: String, CodingKey {
        case trust, expired, expires, published
        case clockFloor = "clock_floor"
    }

    /// Lenient where the daemon may be older: the freshness and trust fields may be absent.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        installed = try c.decode(Bool.self, forKey: .installed)
        version = try c.decodeIfPresent(Int.self, forKey: .version)
        stateRoot = try c.decodeIfPresent(String.self, forKey: .stateRoot)
        channel = try c.decodeIfPresent(String.self, forKey: .channel)
        chunkCount = try c.decodeIfPresent(Int.self, forKey: .chunkCount)
        modelID = try c.decodeIfPresent(String.self, forKey: .modelID)
        dimension = try c.decodeIfPresent(Int.self, forKey: .dimension)
        modelLoaded = try c.decode(Bool.self, forKey: .modelLoaded)
        lexicalOnly = try c.decode(Bool.self, forKey: .lexicalOnly)
        denseSearch = try? c.decodeIfPresent(String.self, forKey: .denseSearch)
        rows = try? c.decodeIfPresent(Rows.self, forKey: .rows)
        notServing = try? c.decodeIfPresent(String.self, forKey: .notServing)
        dataDirectory = try c.decode(String.self, forKey: .dataDirectory)
        dataDirectoryBytes = try c.decode(Int64.self, forKey: .dataDirectoryBytes)
        syncAvailable = try c.decode(Bool.self, forKey: .syncAvailable)
        sync = try c.decode(Sync.self, forKey: .sync)
        channels = try? c.decodeIfPresent([ChannelState].self, forKey: .channels)
        software = try? c.decodeIfPresent(String.self, forKey: .software)
        let f = try decoder.container(keyedBy: FreshnessKeys.self)
        sync.trust = try? f.decodeIfPresent(Trust.self, forKey: .trust)
        sync.expired = try? f.decodeIfPresent(Bool.self, forKey: .expired)
        sync.expires = try? f.decodeIfPresent(String.self, forKey: .expires)
        sync.published = try? f.decodeIfPresent(String.self, forKey: .published)
        sync.clockFloor = try? f.decodeIfPresent(String.self, forKey: .clockFloor)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(installed, forKey: .installed)
        try c.encode(version, forKey: .version)
        try c.encode(stateRoot, forKey: .stateRoot)
        try c.encode(channel, forKey: .channel)
        try c.encode(chunkCount, forKey: .chunkCount)
        try c.encode(modelID, forKey: .modelID)
        try c.encode(dimension, forKey: .dimension)
        try c.encode(modelLoaded, forKey: .modelLoaded)
        try c.encode(lexicalOnly, forKey: .lexicalOnly)
        try c.encode(denseSearch, forKey: .denseSearch)
        try c.encode(rows, forKey: .rows)
        try c.encode(notServing, forKey: .notServing)
        try c.encode(dataDirectory, forKey: .dataDirectory)
        try c.encode(dataDirectoryBytes, forKey: .dataDirectoryBytes)
        try c.encode(syncAvailable, forKey: .syncAvailable)
        try c.encode(sync, forKey: .sync)
        try c.encodeIfPresent(channels, forKey: .channels)
        try c.encodeIfPresent(software, forKey: .software)
        var f = encoder.container(keyedBy: FreshnessKeys.self)
        try f.encode(sync.trust, forKey: .trust)
        try f.encode(sync.expired, forKey: .expired)
        try f.encode(sync.expires, forKey: .expires)
        try f.encode(sync.published, forKey: .published)
        try f.encode(sync.clockFloor, forKey: .clockFloor)
    }
}
