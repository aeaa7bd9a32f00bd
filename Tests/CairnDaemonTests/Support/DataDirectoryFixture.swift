import CairnCore
import CairnDaemon
import CairnEmbedding
import CairnIndex
import CairnSearch
import CairnTestSupport
import Foundation
import Logging

/// A temporary device data directory laid out as CairnSync leaves it (see the helpers' brief):
/// `versions/<n>/{index.sqlite, manifest.json, model -> ../../models/tiny}`, `current -> versions/<n>`.
/// Version n's chunk ids all start with "v<n>-", so an answer's chunks can be traced to it.
/// The root is short (/tmp/cd-…) because a socket path must fit in 107 bytes.
struct DataDirectoryFixture {
    let root: String
    var dataDirectory: String { root + "/data" }
    var socketPath: String { root + "/d.sock" }
    var modelDirectory: String { dataDirectory + "/models/tiny" }

    init() throws {
        root = "/tmp/cd-" + String(UUID().uuidString.prefix(8)).lowercased()
        try FileManager.default.createDirectory(atPath: root + "/data/versions", withIntermediateDirectories: true)
        try TinyModel.write(to: root + "/data/models/tiny")
    }

    func remove() { try? FileManager.default.removeItem(atPath: root) }

    /// The chunks of version `n`.
    static func chunks(version n: Int) -> [Chunk] {
        [
            Chunk(id: "v\(n)-water", title: "Boiling water", content: "Boil the water to drink safe water.",
                  scenario: "flood", tags: ["water"], source: "guide/water.md"),
            Chunk(id: "v\(n)-maps", title: "Flood maps", content: "The flood maps show safe water points.",
                  scenario: "flood", tags: ["maps"]),
            Chunk(id: "v\(n)-storm", title: "Storm", content: "A storm is a flood risk.", scenario: "storm", tags: []),
            Chunk(id: "v\(n)-general", title: "Drink", content: "Drink safe water, the general rule.",
                  scenario: "general", tags: ["water"]),
            Chunk(id: "v\(n)-boiling", title: "Boiling", content: "Boiling is safe.", scenario: "storm", tags: ["water"]),
        ]
    }

    /// Writes version `n` (with or without its model link) and, unless `activate` is false,
    /// points `current` at it.
    func addVersion(_ n: Int, withModel: Bool = true, activate: Bool = true) throws {
        let folder = dataDirectory + "/versions/\(n)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let embedder = try SentenceEmbedder(directory: modelDirectory)
        let chunks = Self.chunks(version: n)
        let entries = zip(chunks, embedder.embed(chunks.map(\.embeddingText))).map { ChunkRecord(chunk: $0, vector: $1) }
        let meta = SnapshotMeta(channel: "test", version: n, dimension: embedder.dimension, modelID: "tiny", entries: entries)
        try SnapshotWriter.create(at: folder + "/index.sqlite", meta: meta, entries: entries)
        try Data(Self.signedManifest(meta)).write(to: URL(fileURLWithPath: folder + "/manifest.json"))
        if withModel { try FileManager.default.createSymbolicLink(atPath: folder + "/model", withDestinationPath: "../../models/tiny") }
        if activate { try point("current", at: n) }
    }

    /// A signed manifest for `meta`, as sync leaves beside an installed index (cairnd's start-up
    /// recovery keeps only versions whose manifest parses). The blob hashes are placeholders:
    /// nothing is downloaded from this data directory.
    static func signedManifest(_ meta: SnapshotMeta) throws -> [UInt8] {
        let placeholder = ContentID(hashing: Array("placeholder".utf8))
        let key = try PublisherKey(seed: [UInt8](repeating: 7, count: 32))
        let now = Timestamp(Date())!
        let manifest = Manifest(channel: meta.channel, version: meta.version, created: now,
                                expires: Timestamp(Date().addingTimeInterval(86_400))!, stateRoot: meta.stateRoot,
                                chunkCount: meta.chunkCount, dimension: meta.dimension,
                                model: .init(id: meta.modelID, dimension: meta.dimension, maxTokens: 16, files: []),
                                snapshot: .init(sha256: placeholder, size: 1, uncompressedSize: 1),
                                publisherKeyID: key.keyID)
        return SignedManifest.encode(manifest, signingKey: key)
    }

    /// Atomically points `link` (current, previous) at versions/<n>.
    func point(_ link: String, at n: Int) throws {
        let temporary = dataDirectory + "/.\(link).tmp"
        try? FileManager.default.removeItem(atPath: temporary)
        try FileManager.default.createSymbolicLink(atPath: temporary, withDestinationPath: "versions/\(n)")
        guard rename(temporary, dataDirectory + "/" + link) == 0 else { throw DaemonError(.socketSetup, "rename failed") }
    }

    /// Version `n` opened as the daemon would serve it.
    func serving(_ n: Int) throws -> ServingVersion {
        try VersionLoader.load(dataDirectory: dataDirectory, link: "versions/\(n)", logger: Logger(label: "test"))
    }

    func configuration() -> DaemonConfiguration {
        DaemonConfiguration(dataDirectory: dataDirectory, socketPath: socketPath, logLevel: .warning)
    }
}
