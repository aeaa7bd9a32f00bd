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
    public var dataDirectory: String
    public var dataDirectoryBytes: Int64
    public var syncAvailable: Bool
    public var sync: Sync

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
        case installed, version, channel, dimension, sync
        case stateRoot = "state_root", chunkCount = "chunk_count", modelID = "model_id"
        case modelLoaded = "model_loaded", lexicalOnly = "lexical_only"
        case dataDirectory = "data_dir", dataDirectoryBytes = "data_dir_bytes", syncAvailable = "sync_available"
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
        try c.encode(dataDirectory, forKey: .dataDirectory)
        try c.encode(dataDirectoryBytes, forKey: .dataDirectoryBytes)
        try c.encode(syncAvailable, forKey: .syncAvailable)
        try c.encode(sync, forKey: .sync)
    }
}
