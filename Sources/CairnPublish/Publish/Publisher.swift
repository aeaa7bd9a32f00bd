public import CairnCore
public import CairnEmbedding
import CairnIndex
import CairnStore
import Foundation
public import Logging

/// Publishes one new version of a channel, all or nothing (protocol/publishing.md): reads the
/// source, embeds only what no earlier version or the cache already has, builds the snapshot and
/// the deltas from the last K versions, checks the canaries against the new index, then writes
/// blobs, `versions/<n>.json` and finally `manifest.json`, under the repository's publish lock.
public struct Publisher: Sendable {
    public let configuration: PublishConfiguration
    public let key: PublisherKey
    public let embedder: SentenceEmbedder
    public let model: PublishedModel
    public let cache: EmbeddingCache?
    public let logger: Logger
    /// Called after each batch of chunks is embedded.
    public let progress: @Sendable (PublishProgress) -> Void
    /// Called at each `PublishStage`; `cairn-server` blocks here for its kill tests.
    public let checkpoint: @Sendable (PublishStage) -> Void

    public init(configuration: PublishConfiguration, key: PublisherKey, embedder: SentenceEmbedder,
                model: PublishedModel, cache: EmbeddingCache?, logger: Logger,
                progress: @escaping @Sendable (PublishProgress) -> Void = { _ in },
                checkpoint: @escaping @Sendable (PublishStage) -> Void = { _ in }) {
        self.configuration = configuration
        self.key = key
        self.embedder = embedder
        self.model = model
        self.cache = cache
        self.logger = logger
        self.progress = progress
        self.checkpoint = checkpoint
    }

    /// Publishes the source as the channel's next version.
    /// - Throws: `PublishError`; whatever it is, the repository still serves the version it served.
    public func publish() throws(PublishError) -> PublishReport {
        let config = configuration
        guard Manifest.isValidChannelName(config.channel) else {
            throw PublishError(.invalidArgument, "channel names are [a-z0-9][a-z0-9._-]{0,63}")
        }
        guard config.keepDeltas >= 0, config.expiresDays >= 1, config.batchSize >= 1 else {
            throw PublishError(.invalidArgument, "keep-deltas must be ≥ 0, expires-days and batch size ≥ 1")
        }
        guard model.dimension == embedder.dimension else {
            throw PublishError(.model, "the model files say dimension \(model.dimension), the embedder \(embedder.dimension)")
        }
        let chunks = try SourceReader.read(path: config.source, chunking: config.chunking)
        guard !chunks.isEmpty else { throw PublishError(.badInput, "\(config.source): no chunks found") }
        logger.info("read source", metadata: ["cairn.publish.chunks": "\(chunks.count)"])

        let repository = Repository(root: config.repository)
        do { try FileSystem.makeDirectory(repository.versionsFolder(config.channel)) } catch {
            throw PublishError(.io, error.message, cause: error)
        }
        let lock = try PublishLock(repository: repository.root, wait: config.lockWait)
        defer { withExtendedLifetime(lock) {} }
        checkpoint(.locked)
        TemporaryFiles.removeLeftovers(in: repository)

        let scratch = try TemporaryFiles.makeFolder()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        var history = PublishedHistory(repository: repository, channel: config.channel,
                                       trustedKeys: [key.publicKey] + repository.storedKeys(), logger: logger)
        let version = history.nextVersion
        let bases = history.loadBases(count: config.keepDeltas, scratch: scratch)

        var vectors = VectorSource(model: model, embedder: embedder, cache: cache, bases: bases, batchSize: config.batchSize)
        let entries = try vectors.vectors(for: chunks, progress: progress)
        checkpoint(.embedded)

        let built = try SnapshotBuilder.build(entries: entries, channel: config.channel, version: version, model: model,
                                              scratch: scratch)
        try CanaryCheck.run(config.canaries, snapshotPath: built.path, embedder: embedder, version: version)
        let deltas = try DeltaBuilder.build(bases: bases, new: built.records, version: version, dimension: model.dimension,
                                            snapshotSize: built.compressed.count)

        let writer = RepositoryWriter(repository: repository, channel: config.channel)
        try writer.putBlob(built.compressed)
        checkpoint(.snapshotStored)
        for delta in deltas.built { try writer.putBlob(delta.compressed) }
        for file in model.files { try writer.putBlob(file.bytes) }
        try writer.storePublicKey(key.publicKey)
        checkpoint(.blobsStored)

        let manifest = try makeManifest(version: version, built: built, deltas: deltas.built)
        let bytes = SignedManifest.encode(manifest, signingKey: key)
        try writer.writeVersion(version, bytes: bytes)
        checkpoint(.versionWritten)
        try writer.writeCurrent(bytes)
        logger.info("published", metadata: ["cairn.publish.version": "\(version)", "cairn.publish.state_root": "\(built.stateRoot)"])

        return PublishReport(
            version: version, stateRoot: built.stateRoot, chunkCount: chunks.count, embedded: vectors.embedded,
            reusedFromSnapshot: vectors.reusedFromSnapshot, reusedFromCache: vectors.reusedFromCache,
            snapshotSize: built.compressed.count, snapshotUncompressedSize: built.uncompressedSize,
            deltas: deltas.built.map { .init(fromVersion: $0.ref.fromVersion, size: $0.ref.size, uncompressedSize: $0.ref.uncompressedSize) },
            skippedDeltas: deltas.skipped + history.skipped, manifestBytes: bytes)
    }

    private func makeManifest(version: Int, built: SnapshotBuilder.Built, deltas: [DeltaBuilder.Built]) throws(PublishError) -> Manifest {
        let now = Int64(Date().timeIntervalSince1970)
        guard let created = Timestamp(secondsSince1970: now),
              let expires = Timestamp(secondsSince1970: now + Int64(configuration.expiresDays) * 86_400) else {
            throw PublishError(.invalidArgument, "the clock or --expires-days is out of the manifest's range")
        }
        return Manifest(channel: configuration.channel, version: version, created: created, expires: expires,
                        stateRoot: built.stateRoot, chunkCount: built.records.count, dimension: model.dimension,
                        model: model.manifestModel,
                        snapshot: .init(sha256: ContentID(hashing: built.compressed), size: built.compressed.count,
                                        uncompressedSize: built.uncompressedSize),
                        deltas: deltas.map(\.ref), canaries: configuration.canaries, publisherKeyID: key.keyID)
    }
}
