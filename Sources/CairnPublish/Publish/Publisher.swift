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
    /// The keys that sign the new manifest, each once (none: a staged version signed later).
    public let keys: [PublisherKey]
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
        self.init(configuration: configuration, keys: [key], embedder: embedder, model: model, cache: cache, logger: logger,
                  progress: progress, checkpoint: checkpoint)
    }

    public init(configuration: PublishConfiguration, keys: [PublisherKey], embedder: SentenceEmbedder,
                model: PublishedModel, cache: EmbeddingCache?, logger: Logger,
                progress: @escaping @Sendable (PublishProgress) -> Void = { _ in },
                checkpoint: @escaping @Sendable (PublishStage) -> Void = { _ in }) {
        self.configuration = configuration
        var seen: Set<KeyID> = []
        self.keys = keys.filter { seen.insert($0.keyID).inserted }
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
        // Vectors from elsewhere are checked against the shipped model before anything is written.
        var supplied: SuppliedVectors?
        if let path = config.vectors {
            guard config.verifySample >= 1 else { throw PublishError(.invalidArgument, "--verify-sample must be at least 1") }
            let file = try SuppliedVectors(path: path)
            try file.verify(chunks: chunks, embedder: embedder, dimension: model.dimension, sample: config.verifySample)
            logger.info("vectors file verified", metadata: ["cairn.publish.vectors": "\(path)", "cairn.publish.sample": "\(min(config.verifySample, chunks.count))"])
            supplied = file
        }

        let repository = Repository(root: config.repository)
        do { try FileSystem.makeDirectory(repository.versionsFolder(config.channel)) } catch {
            throw PublishError(.io, error.message, cause: error)
        }
        let lock = try PublishLock(repository: repository.root, wait: config.lockWait)
        defer { withExtendedLifetime(lock) {} }
        checkpoint(.locked)
        TemporaryFiles.removeLeftovers(in: repository)
        let trust = try repository.trust(keys: keys.map(\.publicKey) + repository.storedKeys())
        try checkKeys(against: trust.current)

        let scratch = try TemporaryFiles.makeFolder()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        var history = PublishedHistory(repository: repository, channel: config.channel,
                                       trustedKeys: trust.keys + trust.roots.flatMap(\.signingKeys), logger: logger)
        let version = history.nextVersion
        if let staged = repository.stagedVersions(config.channel).first {
            throw PublishError(.invalidArgument, "version \(staged) of \(config.channel) is staged (\(repository.stagedPath(config.channel, staged))); release it (cairn-server release) or delete that file first")
        }
        let bases = history.loadBases(count: config.keepDeltas, scratch: scratch)

        var vectors = VectorSource(model: model, embedder: embedder, cache: cache, bases: bases, batchSize: config.batchSize)
        vectors.supplied = supplied
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
        for key in keys { try writer.storePublicKey(key.publicKey) }
        checkpoint(.blobsStored)

        let manifest = try makeManifest(version: version, built: built, deltas: deltas.built, root: trust.current)
        let bytes = SignedManifest.encode(manifest, signingKeys: keys)
        var stagedPath: String?
        if config.stage {
            stagedPath = try writer.writeStaged(version, bytes: bytes)
            logger.info("staged", metadata: ["cairn.publish.version": "\(version)", "cairn.publish.path": "\(stagedPath ?? "")"])
        } else {
            try writer.writeVersion(version, bytes: bytes)
            checkpoint(.versionWritten)
            try writer.writeCurrent(bytes)
            logger.info("published", metadata: ["cairn.publish.version": "\(version)", "cairn.publish.state_root": "\(built.stateRoot)"])
        }

        return PublishReport(
            version: version, stateRoot: built.stateRoot, chunkCount: chunks.count, embedded: vectors.embedded,
            reusedFromSnapshot: vectors.reusedFromSnapshot, reusedFromCache: vectors.reusedFromCache, fromVectorsFile: vectors.fromFile,
            snapshotSize: built.compressed.count, snapshotUncompressedSize: built.uncompressedSize,
            deltas: deltas.built.map { .init(fromVersion: $0.ref.fromVersion, size: $0.ref.size, uncompressedSize: $0.ref.uncompressedSize) },
            skippedDeltas: deltas.skipped + history.skipped, manifestBytes: bytes, stagedPath: stagedPath)
    }

    /// With a root: every key must be one of its signing keys, and (unless staging) there must be
    /// at least its threshold of them. Without one: at least one key unless staging.
    private func checkKeys(against root: RootMetadata?) throws(PublishError) {
        guard let root else {
            guard !keys.isEmpty || configuration.stage else { throw PublishError(.invalidArgument, "publishing needs a signing key (--key)") }
            return
        }
        for key in keys where !root.signingKeys.contains(key.publicKey) {
            throw PublishError(.invalidArgument, "key \(key.keyID) is not a signing key of root \(root.version); add it with cairn-server root rotate --add-signing-key, or sign with another key")
        }
        guard configuration.stage || keys.count >= root.signingThreshold else {
            throw PublishError(.thresholdNotMet, "root \(root.version) needs \(root.signingThreshold) signing keys and \(keys.count) were given; pass more --key files, or --stage and collect signatures with cairn-server sign")
        }
    }

    /// The manifest, created now (or at the newest root's `created`, if that is later, so the
    /// root in force for it is the newest).
    private func makeManifest(version: Int, built: SnapshotBuilder.Built, deltas: [DeltaBuilder.Built],
                              root: RootMetadata?) throws(PublishError) -> Manifest {
        let now = max(Int64(Date().timeIntervalSince1970), root?.created.secondsSince1970 ?? 0)
        guard let created = Timestamp(secondsSince1970: now),
              let expires = configuration.expiresAt ?? Timestamp(secondsSince1970: now + Int64(configuration.expiresDays) * 86_400) else {
            throw PublishError(.invalidArgument, "the clock or --expires-days is out of the manifest's range")
        }
        guard expires > created else {
            throw PublishError(.invalidArgument, "--expires-at \(expires) is not later than the manifest's creation time \(created)")
        }
        guard let keyID = keys.first?.keyID ?? root?.signingKeys.first?.keyID else {
            throw PublishError(.invalidArgument, "publishing needs a signing key (--key)")
        }
        return Manifest(channel: configuration.channel, version: version, created: created, expires: expires,
                        stateRoot: built.stateRoot, chunkCount: built.records.count, dimension: model.dimension,
                        model: model.manifestModel,
                        snapshot: .init(sha256: ContentID(hashing: built.compressed), size: built.compressed.count,
                                        uncompressedSize: built.uncompressedSize),
                        deltas: deltas.map(\.ref), canaries: configuration.canaries, publisherKeyID: keyID)
    }
}
