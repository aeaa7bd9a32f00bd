public import CairnCore
import Foundation

/// What one publish does. Every field has a documented default except the three paths.
public struct PublishConfiguration: Sendable {
    /// The repository's root folder (created if missing).
    public var repository: String
    /// The channel, `[a-z0-9][a-z0-9._-]{0,63}`.
    public var channel: String
    /// A file or folder of chunks (see `SourceReader`).
    public var source: String
    /// Deltas are built from this many of the newest earlier versions. Default 5.
    public var keepDeltas: Int
    /// `keepDeltas`' default; `RepositoryPruner.defaultKeep` follows it.
    public static let defaultKeepDeltas = 5
    /// The manifest expires this many days after it is created. Default 30.
    public var expiresDays: Int
    /// Queries the new version must answer, carried in its manifest. Default none.
    public var canaries: [Canary]
    /// How text files are chunked. Default `ChunkingOptions()` (180 words, 30 overlap).
    public var chunking: ChunkingOptions
    /// Seconds to wait for another publish's lock before refusing. Default 5.
    public var lockWait: Double
    /// Chunks embedded per call of the model (and per progress report). Default 64.
    public var batchSize: Int
    /// The manifest's `expires`, instead of `expiresDays` after it is created. Default none.
    public var expiresAt: Timestamp?
    /// Write the blobs and the signed manifest to `staged/<channel>/<n>.json` for more
    /// signatures (`StagedRelease`) instead of releasing it. Default false.
    public var stage = false
    /// A NumPy `.npy` file of the chunks' vectors, computed elsewhere with the same model
    /// (`SuppliedVectors`). Default none: vectors come from earlier snapshots, the cache, the model.
    public var vectors: String?
    /// Rows of `vectors` re-embedded before anything is written (at least 1). Default 64.
    public var verifySample = 64
    /// The deltas' format (protocol/delta.md): 2 carries the target's set hash, which a device
    /// checks in time proportional to the delta; 1 is what a cairnd from before 2026-11-29
    /// reads (it installs the full snapshot instead of a delta of format 2). Default 2.
    public var deltaFormat = 2

    public init(repository: String, channel: String, source: String, keepDeltas: Int = PublishConfiguration.defaultKeepDeltas, expiresDays: Int = 30,
                canaries: [Canary] = [], chunking: ChunkingOptions = ChunkingOptions(), lockWait: Double = 5,
                batchSize: Int = 64) {
        self.repository = repository
        self.channel = channel
        self.source = source
        self.keepDeltas = keepDeltas
        self.expiresDays = expiresDays
        self.canaries = canaries
        self.chunking = chunking
        self.lockWait = lockWait
        self.batchSize = batchSize
    }
}

/// The points of a publish at which `Publisher`'s checkpoint is called — the places a test
/// (through `cairn-server`'s `CAIRN_PUBLISH_PAUSE_AT`) stops a publish to kill it.
public enum PublishStage: String, Sendable, CaseIterable {
    /// The lock is held; nothing is written yet.
    case locked
    /// Every chunk has its vector; nothing is written to the repository yet.
    case embedded
    /// The snapshot blob is stored; deltas and model blobs may not be.
    case snapshotStored = "snapshot-stored"
    /// Every blob is stored; no manifest is written.
    case blobsStored = "blobs-stored"
    /// `versions/<n>.json` is written; `manifest.json` still names the previous version.
    case versionWritten = "version-written"
}

/// What a publish did.
public struct PublishReport: Sendable {
    public struct DeltaInfo: Sendable {
        public var fromVersion: Int
        public var size: Int
        public var uncompressedSize: Int
    }

    public var version: Int
    public var stateRoot: ContentID
    public var chunkCount: Int
    /// Chunks whose vector the model computed in this publish.
    public var embedded: Int
    /// Chunks whose vector came from an earlier version's snapshot.
    public var reusedFromSnapshot: Int
    /// Chunks whose vector came from the embedding cache.
    public var reusedFromCache: Int
    /// Chunks whose vector came from the `--vectors` file.
    public var fromVectorsFile = 0
    public var snapshotSize: Int
    public var snapshotUncompressedSize: Int
    public var deltas: [DeltaInfo]
    /// Earlier versions for which no delta was kept, with why.
    public var skippedDeltas: [String]
    /// What the publisher should act on soon, one line each (a root about to expire).
    public var warnings: [String] = []
    /// The signed manifest's bytes as written.
    public var manifestBytes: [UInt8]
    /// Where the manifest waits for signatures when the publish was staged; nil when released.
    public var stagedPath: String?

    /// One line: version, chunks, embedded vs reused, snapshot and delta sizes.
    public var summary: String {
        let deltaText = deltas.isEmpty ? "no deltas"
            : "deltas " + deltas.map { "v\($0.fromVersion)→\(version) \($0.size) B" }.joined(separator: ", ")
        return (stagedPath.map { "staged version \(version) in \($0) (not released): " } ?? "published version \(version): ")
            + "\(chunkCount) chunks, " + (fromVectorsFile > 0 ? "\(fromVectorsFile) from the vectors file, " : "") + "\(embedded) embedded, "
            + "\(reusedFromSnapshot + reusedFromCache) reused (\(reusedFromSnapshot) from earlier snapshots, \(reusedFromCache) from cache), "
            + "snapshot \(snapshotSize) B (\(snapshotUncompressedSize) B uncompressed), \(deltaText)"
    }
}

/// Embedding progress: `done` of `total` chunks that need the model.
public struct PublishProgress: Sendable {
    /// Chunks read from the source and given their vectors so far.
    public var done: Int
    /// Chunks in the source, when known before the end (the rows of a `--vectors` file); nil
    /// while the source streams.
    public var total: Int?
    /// Of `done`, the chunks the model embedded.
    public var embedded: Int
    /// Whether every chunk has been read.
    public var finished: Bool
}
