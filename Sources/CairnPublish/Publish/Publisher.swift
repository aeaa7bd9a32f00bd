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

    /// Publishes the source as the channel's next version. The source streams through: a batch
    /// of chunks at a time is given its vectors and staged in the new snapshot file, and every
    /// later step (the snapshot's checks, its compression, the canaries, the deltas) is a pass
    /// over files in the scratch folder, so memory does not grow with the knowledge base.
    /// - Throws: `PublishError`; whatever it is, the repository still serves the version it served.
    public func publish() throws(PublishError) -> PublishReport {
        let config = configuration
        guard Manifest.isValidChannelName(config.channel) else {
            throw PublishError(.invalidArgument, "channel names are [a-z0-9][a-z0-9._-]{0,63}")
        }
        guard config.keepDeltas >= 0, config.expiresDays >= 1, config.batchSize >= 1 else {
            throw PublishError(.invalidArgument, "keep-deltas must be ≥ 0, expires-days and batch size ≥ 1")
        }
        // Before anything is read or written: refused later, it would leave its blobs behind.
        if let expiresAt = config.expiresAt, expiresAt.secondsSince1970 <= Int64(Date().timeIntervalSince1970) {
            throw PublishError(.invalidArgument, "--expires-at \(expiresAt) is not in the future; nothing was written")
        }
        // Checked again when the manifest is made; here, before hours of embedding are spent on a
        // version whose expiry cannot be written (past the year 9999), with a day's margin.
        if config.expiresAt == nil {
            let (margined, over) = Int64(config.expiresDays).addingReportingOverflow(1)
            let (days, overflow) = margined.multipliedReportingOverflow(by: 86_400)
            let (end, endOverflow) = Int64(Date().timeIntervalSince1970).addingReportingOverflow(days)
            guard !over, !overflow, !endOverflow, Timestamp(secondsSince1970: end) != nil else {
                throw PublishError(.invalidArgument, "--expires-days \(config.expiresDays) ends past the year 9999, which a manifest cannot say; nothing was written")
            }
        }
        guard (1...2).contains(config.deltaFormat) else {
            throw PublishError(.invalidArgument, "delta-format must be 1 or 2 (protocol/delta.md)")
        }
        guard model.dimension == embedder.dimension else {
            throw PublishError(.model, "the model files say dimension \(model.dimension), the embedder \(embedder.dimension)")
        }
        guard FileManager.default.fileExists(atPath: config.source) else {
            throw PublishError(.io, "the source \(config.source) does not exist")
        }
        // Vectors from elsewhere: checked against the shipped model (a sample of rows, found by a
        // pass over the source that writes nothing) before anything is written: the repository,
        // and the embedding cache, which the file's rows fill as the snapshot is staged.
        var supplied: SuppliedVectors?
        /// Which chunk each row was read as before the lock (`rowKey`), in reading order: the
        /// staging pass must read the same chunks (a vectors file's rows were checked as them).
        var checkedRows: [UInt64] = []
        /// What the first pass noticed about the source (a link to a folder, an empty file).
        var notices: [String] = []
        if let path = config.vectors {
            guard config.verifySample >= 1 else { throw PublishError(.invalidArgument, "--verify-sample must be at least 1") }
            let file = try SuppliedVectors(path: path)
            try file.check(dimension: model.dimension)
            let read = try sampleSource(rows: file.sampleRows(config.verifySample))
            try file.verify(sampled: read.sampled, chunks: read.chunks, embedder: embedder, dimension: model.dimension)
            logger.info("vectors file verified", metadata: ["cairn.publish.vectors": "\(file.path)",
                                                            "cairn.publish.sample": "\(read.sampled.count)"])
            supplied = file
            (checkedRows, notices) = (read.keys, read.notices)
        } else {
            // Every record checked before the lock: a bad one near the end of a large source
            // must not refuse the publish after hours of embedding, holding the lock all along.
            // What was read is what the staging pass must read again: a file rewritten between
            // the two (an editor, a sync tool) would otherwise go out changed or cut short.
            let read = try sampleSource(rows: [])
            (checkedRows, notices) = (read.keys, read.notices)
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
        // Dated now, before anything is staged: an --expires-at before this version's creation
        // time (moved past the clock by a newer root or manifest) is refused with nothing written.
        // A manifest only keys the newest root revoked signed counts no later than the clock.
        let known = trust.keys + trust.roots.flatMap(\.signingKeys)
        let newest = repository.newestManifestCreated(inForce: trust.current?.signingKeys ?? known, others: known, now: Timestamp(clamping: Date()))
        let created = try creationTime(root: trust.current, newest: newest)

        let folder = try ScratchFolder()
        defer { folder.remove() }
        let scratch = folder.path
        // Any key the repository knows makes a version a delta base: a device checks a delta's
        // base against its installed state root and the result against this manifest's. Only a
        // key this publish signs with, or a signing key of the root in force, vouches for a
        // version's vectors, which this publish would sign as its own: not a key under keys/
        // (whoever can write the folder can add one) nor one a root revoked.
        var history = PublishedHistory(repository: repository, channel: config.channel,
                                       trustedKeys: known,
                                       vouchingKeys: keys.map(\.publicKey) + (trust.current?.signingKeys ?? []), logger: logger)
        let version = history.nextVersion
        if let staged = repository.stagedVersions(config.channel).first {
            throw PublishError(.invalidArgument, "version \(staged) of \(config.channel) is staged (\(repository.stagedPath(config.channel, staged))); release it (cairn-server release) or delete that file first")
        }
        // At least the newest earlier version, whose vectors are reused (step 4 of
        // publishing.md) even with --keep-deltas 0; deltas come from the first K only.
        let bases = try history.loadBases(count: max(1, config.keepDeltas), scratch: scratch)

        var vectors = try VectorSource(model: model, embedder: embedder, cache: cache, bases: bases, scratch: scratch)
        vectors.supplied = supplied
        if supplied != nil, cache != nil { vectors.gathered = try EmbeddingCache(path: scratch + "/gathered-vectors.sqlite") }
        let stream: SnapshotWriter.Stream
        do { stream = try SnapshotWriter.Stream(at: scratch + "/snapshot-\(version).sqlite", dimension: model.dimension) } catch {
            throw PublishError(.io, "cannot start the snapshot: \(error.message)", cause: error)
        }
        let chunks = try stage(into: stream, vectors: &vectors, checkedRows: checkedRows)
        let (expected, check) = supplied.map { ($0.rows, "the check of --vectors found") } ?? (checkedRows.count, "the check before the publish lock read")
        if chunks != expected {
            throw PublishError(.badInput, "\(config.source): \(chunks) chunks, where \(check) \(expected): the source changed while it was published; nothing was published")
        }
        if vectors.disagreeing > 0 {
            logger.warning("rows of the vectors file differ from the earlier version's vectors for the same text; published as given",
                           metadata: ["cairn.publish.rows": "\(vectors.disagreeing)"])
        }
        progress(PublishProgress(done: chunks, total: supplied?.rows, embedded: vectors.embedded, finished: true))
        logger.info("read source", metadata: ["cairn.publish.chunks": "\(chunks)"])
        checkpoint(.embedded)

        let built = try SnapshotBuilder.finish(stream, channel: config.channel, version: version, model: model, scratch: scratch)
        try CanaryCheck.run(config.canaries, snapshotPath: built.path, embedder: embedder, version: version)
        let deltas = try DeltaBuilder.build(bases: Array(bases.prefix(config.keepDeltas)), new: built,
                                            withSetHash: config.deltaFormat == 2, scratch: scratch)

        let writer = RepositoryWriter(repository: repository, channel: config.channel)
        // Blobs found damaged and written again: said in the report, or logged when a later step
        // fails (the next publish finds them whole, and would never say them).
        var repaired: [ContentID] = []
        var repairsReported = false
        defer {
            if !repairsReported, let warning = Self.repairedBlobsWarning(repaired) { logger.warning("\(warning)") }
        }
        func note(_ id: ContentID?) { if let id { repaired.append(id) } }
        note(try writer.putBlob(file: built.blobPath, id: built.blob.sha256))
        checkpoint(.snapshotStored)
        for delta in deltas.built { note(try writer.putBlob(file: delta.blobPath, id: delta.ref.sha256)) }
        for file in model.files { note(try writer.putBlob(file.bytes)) }
        for key in keys { try writer.storePublicKey(key.publicKey) }
        checkpoint(.blobsStored)

        let manifest = try makeManifest(version: version, built: built, deltas: deltas.built, root: trust.current, created: created)
        let bytes = SignedManifest.encode(manifest, signingKeys: keys)
        try Self.checkReadable(bytes, signedBy: keys)
        var stagedPath: String?
        if config.stage {
            stagedPath = try writer.writeStaged(version, bytes: bytes)
            logger.info("staged", metadata: ["cairn.publish.version": "\(version)", "cairn.publish.path": "\(stagedPath ?? "")"])
        } else {
            try writer.writeVersion(version, bytes: bytes)
            checkpoint(.versionWritten)
            try writer.writeCurrent(bytes)
            logger.info("published", metadata: ["cairn.publish.version": "\(version)", "cairn.publish.state_root": "\(built.meta.stateRoot)"])
        }
        // Written: the vectors file's rows are the version's now, and may serve the next
        // publish. The version stands whatever happens to the cache.
        if let gathered = vectors.gathered, let cache {
            do throws(PublishError) { try cache.merge(from: gathered.path) } catch {
                logger.warning("the vectors file's rows were not added to the embedding cache; the next publish embeds what it cannot reuse",
                               metadata: ["cairn.publish.error": "\(error.message)"])
            }
        }

        var report = PublishReport(
            version: version, stateRoot: built.meta.stateRoot, chunkCount: built.meta.chunkCount, embedded: vectors.embedded,
            reusedFromSnapshot: vectors.reusedFromSnapshot, reusedFromCache: vectors.reusedFromCache, fromVectorsFile: vectors.fromFile,
            snapshotSize: built.blob.size, snapshotUncompressedSize: built.blob.inputSize,
            deltas: deltas.built.map { .init(fromVersion: $0.ref.fromVersion, size: $0.ref.size, uncompressedSize: $0.ref.uncompressedSize) },
            skippedDeltas: deltas.skipped + history.skipped, manifestBytes: bytes, stagedPath: stagedPath)
        report.warnings += notices
        if let root = trust.current, let warning = Self.rootExpiryWarning(root, created: manifest.created, expires: manifest.expires) {
            report.warnings.append(warning)  // printed by the command, once
        }
        if let warning = Self.repairedBlobsWarning(repaired) { report.warnings.append(warning) }
        repairsReported = true
        return report
    }

    /// The warning for blobs found damaged in the repository and written again, nil for none:
    /// a cache or CDN in front of it may still hold the damaged copies, which devices refuse
    /// (`hash_mismatch`) until they expire or are purged.
    static func repairedBlobsWarning(_ ids: [ContentID]) -> String? {
        guard !ids.isEmpty else { return nil }
        let named = ids.map(BlobStore.relativePath(of:)).joined(separator: ", ")
        return "\(ids.count) blob(s) in the repository were damaged and have been written again (\(named)); purge them from any cache or CDN in front of the repository, which may still hold the damaged copies that devices refuse"
    }

    /// Refuses a manifest file devices would not read, before it is written: over the size a
    /// device takes (a canaries file near its own limit grows in the manifest), or one that does
    /// not parse and verify again. Written, it would replace a good `manifest.json`.
    static func checkReadable(_ bytes: [UInt8], signedBy keys: [PublisherKey]) throws(PublishError) {
        guard bytes.count <= CanonicalJSON.maxInputBytes else {
            throw PublishError(.badInput, "the manifest would be \(bytes.count) bytes; devices read at most \(CanonicalJSON.maxInputBytes) (fewer or shorter canaries); nothing was published")
        }
        do throws(CoreError) {
            if keys.isEmpty {
                _ = try Manifest(json: SignedManifest.decodeEnvelope(bytes).content)
            } else {
                _ = try SignedManifest.decodeAndVerify(bytes, trustedKeys: keys.map(\.publicKey))
            }
        } catch {
            throw PublishError(.badInput, "the manifest written would not read back (\(error.message)); nothing was published")
        }
    }

    /// How long before its root expires a publish starts to say so.
    static let rootExpiryNotice: Int64 = 90 * 86_400

    /// A line when `root` expires before a manifest `created` and `expires` then does, or
    /// within `rootExpiryNotice` of its creation. Devices set to `expired_updates = refuse` take
    /// nothing once the newest root has expired (protocol/root.md), and one offline for months
    /// learns of a rotation only when it comes: the rotation must be published well before.
    static func rootExpiryWarning(_ root: RootMetadata, created: Timestamp, expires: Timestamp) -> String? {
        let start = created.secondsSince1970, ends = root.expires.secondsSince1970
        if ends <= start {
            return "root \(root.version) expired at \(root.expires); devices set to expired_updates = refuse take no new version until a rotated root reaches them (cairn-server root rotate)"
        }
        guard ends < max(expires.secondsSince1970, start.addingReportingOverflow(rootExpiryNotice).partialValue) else { return nil }
        let days = (ends - start) / 86_400
        return "root \(root.version) expires at \(root.expires), in \(days) day(s)\(root.expires < expires ? ", before this version does" : ""); rotate it (cairn-server root rotate) before then, or devices set to expired_updates = refuse stop taking new versions"
    }

    /// Reads the source a chunk at a time into `stream`, `configuration.batchSize` chunks at a
    /// time given their vectors, and returns the chunk count. A repeated id is refused naming
    /// both places.
    /// Each chunk must be the one its row was read as before the lock (`checkedRows`): with a
    /// vectors file, or it would take another chunk's vector (and put it in the embedding cache
    /// under its own text); without, or a file rewritten meanwhile would go out changed or cut
    /// short. Refused before its batch is given vectors; a row past those read, at once.
    private func stage(into stream: SnapshotWriter.Stream, vectors: inout VectorSource, checkedRows: [UInt64]) throws(PublishError) -> Int {
        var batch: [(row: Int, chunk: Chunk, file: String, position: String)] = []
        var row = 0
        let total = vectors.supplied?.rows
        func flush() throws(PublishError) {
            guard !batch.isEmpty else { return }
            let found = try vectors.vectors(for: batch.map { ($0.row, $0.chunk) })
            for (item, vector) in zip(batch, found) {
                do { try stream.add(item.chunk, vector: vector, origin: "\(item.file) \(item.position)") } catch {
                    if error.code == .duplicateID { throw .badInput(item.file, item.position, error.message) }
                    throw PublishError(.io, "cannot stage the snapshot's rows: \(error.message)", cause: error)
                }
            }
            batch.removeAll(keepingCapacity: true)
            progress(PublishProgress(done: row, total: total, embedded: vectors.embedded, finished: false))
        }
        try forEachSourceChunk { (file, position, chunk) throws(PublishError) in
            // Past a vectors file's last row (a source grown since the file was checked), chunks
            // are only counted: the caller then refuses the source.
            if let total, row >= total {
                row += 1
                return
            }
            if total == nil, row >= checkedRows.count {
                throw .badInput(file, position, "chunk \"\(chunk.id)\" is past the \(checkedRows.count) chunks read before the publish lock: the source changed while it was published; nothing was published")
            }
            if row < checkedRows.count, Self.rowKey(chunk) != checkedRows[row] {
                let checked = total == nil ? "the one read at row \(row) before the publish lock" : "the one row \(row) of --vectors was checked as"
                throw .badInput(file, position, "chunk \"\(chunk.id)\" is not \(checked): its id or text changed since; the source changed while it was published; nothing was published")
            }
            batch.append((row, chunk, file, position))
            row += 1
            if batch.count >= configuration.batchSize { try flush() }
        }
        try flush()
        guard row > 0 else { throw PublishError(.badInput, "\(configuration.source): no chunks found") }
        return row
    }

    /// The source's chunk count, and the id and embedding text of each chunk whose position in
    /// reading order is in `rows`: a pass over the source that embeds and writes nothing. A
    /// repeated id is refused here too, naming both places (`duplicateID`).
    private func sampleSource(rows: Set<Int>) throws(PublishError)
        -> (chunks: Int, sampled: [(row: Int, id: String, text: String)], keys: [UInt64], notices: [String]) {
        var sampled: [(row: Int, id: String, text: String)] = []
        var keys: [UInt64] = []
        // 8 bytes of each id's hash (about 11 MB at a million chunks); a hash seen twice is two
        // equal ids or, rarely, a collision, which a second pass over those ids alone tells apart.
        var seen = Set<Int>(), twice = Set<Int>()
        var notices: [String] = []
        try forEachSourceChunk(notice: { notices.append($0) }) { (_, _, chunk) throws(PublishError) in
            if rows.contains(keys.count) { sampled.append((keys.count, chunk.id, chunk.embeddingText)) }
            keys.append(Self.rowKey(chunk))
            let hash = Self.idHash(chunk.id)
            if !seen.insert(hash).inserted { twice.insert(hash) }
        }
        guard !keys.isEmpty else { throw PublishError(.badInput, "\(configuration.source): no chunks found") }
        if !twice.isEmpty { try duplicateID(among: twice) }
        return (keys.count, sampled, keys, notices)
    }

    /// The hash of an id's bytes (not of the String: two canonically equivalent ids are two ids,
    /// as SQLite and the rows files hold them).
    private static func idHash(_ id: String) -> Int {
        var hasher = Hasher()
        var id = id
        id.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        return hasher.finalize()
    }

    /// `SourceReader.forEachChunk` over this publish's source, with its chunking, passing over
    /// the repository published to when it lies inside the source folder.
    private func forEachSourceChunk(notice: (String) -> Void = { _ in },
                                    _ body: (_ file: String, _ position: String, Chunk) throws(PublishError) -> Void) throws(PublishError) {
        try SourceReader.forEachChunk(path: configuration.source, chunking: configuration.chunking,
                                      excluding: [configuration.repository], notice: notice, body)
    }

    /// Reads the source again for the ids whose hash is in `hashes`, and refuses the first one
    /// seen twice (byte for byte), naming both places; returns when none is (collisions only).
    private func duplicateID(among hashes: Set<Int>) throws(PublishError) {
        var first: [[UInt8]: String] = [:]
        try forEachSourceChunk { (file, position, chunk) throws(PublishError) in
            guard hashes.contains(Self.idHash(chunk.id)) else { return }
            let bytes = Array(chunk.id.utf8)
            if let earlier = first[bytes] {
                throw .badInput(file, position, "duplicate id \"\(chunk.id)\" (first seen in \(earlier)); nothing was published")
            }
            first[bytes] = "\(file) \(position)"
        }
    }

    /// The first 8 bytes of the SHA-256 of a chunk's id and embedding text (each length-
    /// prefixed): which chunk a row was read as before the lock (8 MB for a million rows).
    static func rowKey(_ chunk: Chunk) -> UInt64 {
        var hasher = ContentID.Hasher()
        for field in [chunk.id, chunk.embeddingText] {
            var length = UInt64(field.utf8.count).littleEndian
            withUnsafeBytes(of: &length) { hasher.update($0) }
            var text = field
            text.withUTF8 { hasher.update(UnsafeRawBufferPointer($0)) }
        }
        return hasher.finalize().bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// With a root: every key must be one of its signing keys, and (unless staging) there must be
    /// at least its threshold of them. Without one: at least one key, staging or not.
    private func checkKeys(against root: RootMetadata?) throws(PublishError) {
        // Devices read at most this many signatures in a manifest file: more would publish a
        // current manifest no device reads.
        guard keys.count <= SignedManifest.maxSignatures else {
            throw PublishError(.invalidArgument, "\(keys.count) --key files were given; a manifest carries at most \(SignedManifest.maxSignatures) signatures (protocol/manifest.md)")
        }
        guard let root else {
            // Staging without a key needs a root, whose signing keys sign later: the manifest
            // names a publisher key.
            guard !keys.isEmpty else {
                throw PublishError(.invalidArgument, configuration.stage
                    ? "--stage without --key needs a root (cairn-server root init); without one, stage with a --key"
                    : "publishing needs a signing key (--key)")
            }
            return
        }
        for key in keys where !root.signingKeys.contains(key.publicKey) {
            throw PublishError(.invalidArgument, "key \(key.keyID) is not a signing key of root \(root.version); add it with cairn-server root rotate --add-signing-key, or sign with another key")
        }
        guard configuration.stage || keys.count >= root.signingThreshold else {
            throw PublishError(.thresholdNotMet, "root \(root.version) needs \(root.signingThreshold) signing keys and \(keys.count) were given; pass more --key files, or --stage and collect signatures with cairn-server sign")
        }
    }

    /// The manifest, created now, or at the newest root's `created` or the repository's newest
    /// manifest's `created` if either is later: so that the root in force for it is the newest,
    /// and `created` never goes back. A publisher whose clock is behind (reset, or once ahead
    /// and since corrected) would otherwise sign versions that devices judge expired: their
    /// clock floor has reached the earlier version's `created`.
    /// The new manifest's `created`: the clock, or the newest root's or manifest's `created`
    /// when later (never back); its `expires` (`--expires-at`, or `--expires-days` on) must be
    /// later still.
    private func creationTime(root: RootMetadata?, newest: Timestamp?) throws(PublishError) -> Timestamp {
        let wall = Int64(Date().timeIntervalSince1970)
        let now = max(wall, root?.created.secondsSince1970 ?? 0, newest?.secondsSince1970 ?? 0)
        if let newest, newest.secondsSince1970 - wall > 3_600 {
            logger.warning("the clock is behind the newest manifest; this version is created at its time",
                           metadata: ["cairn.publish.clock": "\(Timestamp(secondsSince1970: wall).map { "\($0)" } ?? "\(wall)")",
                                      "cairn.publish.created": "\(newest)"])
        }
        guard let created = Timestamp(secondsSince1970: now) else {
            throw PublishError(.invalidArgument, "the clock is out of the manifest's range")
        }
        if let expires = configuration.expiresAt, expires <= created {
            throw PublishError(.invalidArgument, "--expires-at \(expires) is not later than the manifest's creation time \(created) (the newest root's or manifest's); nothing was written")
        }
        return created
    }

    /// `floor`: `creationTime`'s, taken before staging; the clock at the end of it, if later,
    /// dates the manifest.
    private func makeManifest(version: Int, built: SnapshotBuilder.Built, deltas: [DeltaBuilder.Built],
                              root: RootMetadata?, created floor: Timestamp) throws(PublishError) -> Manifest {
        let now = max(Int64(Date().timeIntervalSince1970), floor.secondsSince1970)
        let (days, overflow) = Int64(configuration.expiresDays).multipliedReportingOverflow(by: 86_400)
        let (end, endOverflow) = now.addingReportingOverflow(days)
        guard let created = Timestamp(secondsSince1970: now),
              let expires = configuration.expiresAt ?? (overflow || endOverflow ? nil : Timestamp(secondsSince1970: end)) else {
            throw PublishError(.invalidArgument, "the clock or --expires-days is out of the manifest's range")
        }
        guard expires > created else {
            throw PublishError(.invalidArgument, "--expires-at \(expires) is not later than the manifest's creation time \(created)")
        }
        guard let keyID = keys.first?.keyID ?? root?.signingKeys.first?.keyID else {
            throw PublishError(.invalidArgument, "publishing needs a signing key (--key)")
        }
        return Manifest(channel: configuration.channel, version: version, created: created, expires: expires,
                        stateRoot: built.meta.stateRoot, chunkCount: built.meta.chunkCount, dimension: model.dimension,
                        model: model.manifestModel,
                        snapshot: .init(sha256: built.blob.sha256, size: built.blob.size, uncompressedSize: built.blob.inputSize),
                        deltas: deltas.map(\.ref), canaries: configuration.canaries, publisherKeyID: keyID)
    }
}
