/// What `Syncer.export(to:)` wrote (the body of `POST /v1/export`, protocol/socket-api.md).
public struct ExportResult: Sendable, Equatable, Codable {
    /// How the snapshot blob was obtained.
    public enum SnapshotOrigin: String, Sendable, Codable {
        /// The verified blob kept when the version was installed from it.
        case kept
        /// Rebuilt from the installed index; its SHA-256 equals the manifest's.
        case rebuilt
    }

    public var to: String
    public var channel: String
    public var version: Int
    public var stateRoot: String
    public var snapshot: SnapshotOrigin
    public var files: Int
    public var bytes: Int64

    enum CodingKeys: String, CodingKey {
        case to, channel, version, snapshot, files, bytes
        case stateRoot = "state_root"
    }
}
