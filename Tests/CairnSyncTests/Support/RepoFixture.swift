import CairnTestSupport
import CairnCore
import CairnEmbedding
import CairnIndex
import CairnStore
import Foundation

/// TEST FIXTURE ONLY: a minimal repository writer (protocol/repository.md) for the sync tests.
/// It signs real manifests, writes real snapshot files, real deltas and the tiny model as blobs,
/// with the same formats as CairnPublish but each step in the test's hands: a manifest or a
/// delta made wrong on purpose, vectors without the model (`withModel: false`), a version
/// written at any number. The process tests publish with the real `cairn-server`.
final class RepoFixture {
    let root: String
    let key = PublisherKey.generate()
    let channel = "stable"
    let dimension = TinyModel.configuration.hiddenSize
    let modelFiles: [Manifest.ModelFile]
    /// Whether the deltas it publishes are of format 2, with the target's set hash (else 1).
    var deltasWithSetHash = true
    private let embedder: SentenceEmbedder?
    private(set) var records: [Int: [ChunkRecord]] = [:]
    private(set) var manifestBytes: [Int: [UInt8]] = [:]

    var blobs: BlobStore { BlobStore(root: root) }
    var url: String { "file://" + root }

    init(withModel: Bool = true) throws {
        root = try TemporaryDirectory.make()
        guard withModel else {
            modelFiles = []
            embedder = nil
            return
        }
        let modelDir = try TemporaryDirectory.make()
        var files: [Manifest.ModelFile] = []
        for (name, bytes) in TinyModel.files(seed: 7) {
            files.append(Manifest.ModelFile(name: name, sha256: try BlobStore(root: root).put(bytes), size: bytes.count))
            try Data(bytes).write(to: URL(fileURLWithPath: modelDir + "/" + name))
        }
        modelFiles = files
        embedder = try SentenceEmbedder(directory: modelDir, maximumTokens: 16)
    }

    /// `count` short chunks; `revision` changes the text of chunk 0 only (so deltas stay small).
    static func chunks(count: Int = 40, revision: Int = 1) -> [Chunk] {
        let words = ["water", "boil", "safe", "drink", "storm", "map", "the", "a"]
        return (0..<count).map { i in
            let content = i == 0 ? "flood maps revision \(revision)"
                : (0..<8).map { words[(i * 7 + $0 * 3) % words.count] }.joined(separator: " ") + " note \(i)"
            return Chunk(id: String(format: "chunk-%03d", i), title: "Guide \(i)", content: content,
                         scenario: i % 2 == 0 ? "flood" : "general", tags: ["t\(i % 3)"])
        }
    }

    private func vector(for chunk: Chunk) -> [Float] {
        if let embedder { return embedder.embed(chunk.embeddingText) }
        // Seeded from the id's bytes: Swift's hashValue changes with every process.
        var generator = SplitMix64(seed: ContentID(hashing: Array(chunk.id.utf8)).bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) })
        let raw = (0..<dimension).map { _ in Float(generator.next() % 1000) / 1000 + 0.01 }
        let norm = raw.reduce(0) { $0 + $1 * $1 }.squareRoot()
        return raw.map { $0 / norm }
    }

    /// Publishes `version` made of `chunks`, with deltas from each of `deltasFrom`, and makes it
    /// the channel's current manifest unless `current` is false. `adjust` edits the manifest
    /// before signing (for hostile cases); `signer` replaces the fixture's key.
    @discardableResult
    func publish(version: Int, chunks: [Chunk] = RepoFixture.chunks(), deltasFrom: [Int] = [],
                 canaries: [Canary] = [], expires: Date = Date().addingTimeInterval(86_400 * 30),
                 current: Bool = true, signer: PublisherKey? = nil,
                 adjust: (inout Manifest) -> Void = { _ in }) throws -> Manifest {
        let entries = chunks.map { ChunkRecord(chunk: $0, vector: vector(for: $0)) }
        let modelID = embedder == nil ? "none" : "test/tiny-bert"
        let meta = SnapshotMeta(channel: channel, version: version, dimension: dimension, modelID: modelID, entries: entries)
        let file = try TemporaryDirectory.make() + "/index.sqlite"
        try SnapshotWriter.create(at: file, meta: meta, entries: entries)
        let raw = try FileSystem.read(file)
        // Level 9, as the publisher's (SnapshotBuilder): a device that installed the version by
        // a delta rebuilds these very bytes for an export.
        let compressed = try Zlib.compress(raw, level: 9)
        let snapshot = Manifest.Snapshot(sha256: try blobs.put(compressed), size: compressed.count, uncompressedSize: raw.count)
        var deltas: [Manifest.DeltaRef] = []
        for from in deltasFrom {
            let old = records[from]!
            let delta = try Delta.between(old: old, new: entries, fromVersion: from, toVersion: version, dimension: dimension,
                                          withSetHash: deltasWithSetHash)
            let bytes = try Zlib.compress(delta.encoded)
            deltas.append(Manifest.DeltaRef(fromVersion: from, fromStateRoot: delta.fromStateRoot, sha256: try blobs.put(bytes),
                                            size: bytes.count, uncompressedSize: delta.encoded.count))
        }
        let created = Timestamp(expires.addingTimeInterval(-86_400 * 60))!
        var manifest = Manifest(channel: channel, version: version, created: created, expires: Timestamp(expires)!,
                                stateRoot: meta.stateRoot, chunkCount: chunks.count, dimension: dimension,
                                model: .init(id: modelID, dimension: dimension, maxTokens: 16, files: modelFiles),
                                snapshot: snapshot, deltas: deltas, canaries: canaries, publisherKeyID: (signer ?? key).keyID)
        adjust(&manifest)
        let signed = SignedManifest.encode(manifest, signingKey: signer ?? key)
        records[version] = entries
        manifestBytes[version] = signed
        let channelDir = "\(root)/channels/\(channel)"
        try FileSystem.makeDirectory(channelDir + "/versions")
        try FileSystem.writeAtomically(signed, to: "\(channelDir)/versions/\(version).json")
        if current { try FileSystem.writeAtomically(signed, to: "\(channelDir)/manifest.json") }
        return manifest
    }

    /// A delta blob from version `from` to `to` (both published) whose first upserted chunk's
    /// content is replaced by `content` after the fact, stored in the repository and described
    /// as the honest delta's entry would be (its SHA-256 is the tampered blob's, so it downloads
    /// and hashes fine: only the state root can catch it). Returns the entry and the honest upserts' ids.
    func tamperedDelta(from: Int, to: Int, content: String) throws -> (ref: Manifest.DeltaRef, upserted: [String]) {
        let honest = try Delta.between(old: records[from]!, new: records[to]!, fromVersion: from, toVersion: to, dimension: dimension,
                                       withSetHash: deltasWithSetHash)
        var upserts = honest.upserts
        upserts[0].chunk.content = content
        let tampered = try Delta(fromVersion: from, toVersion: to, fromStateRoot: honest.fromStateRoot, toStateRoot: honest.toStateRoot,
                                 toSetHash: honest.toSetHash, dimension: dimension, upserts: upserts, deletes: honest.deletes)
        let bytes = try Zlib.compress(tampered.encoded)
        let ref = Manifest.DeltaRef(fromVersion: from, fromStateRoot: honest.fromStateRoot, sha256: try blobs.put(bytes),
                                    size: bytes.count, uncompressedSize: tampered.encoded.count)
        return (ref, honest.upserts.map(\.chunk.id))
    }

    /// Makes an already published version's manifest current again (a stale mirror, a rollback).
    func makeCurrent(_ version: Int) throws {
        try FileSystem.writeAtomically(manifestBytes[version]!, to: "\(root)/channels/\(channel)/manifest.json")
    }

    /// Replaces a stored blob's bytes (a compressed stream of the caller's choosing).
    func overwriteBlob(_ id: ContentID, with bytes: [UInt8]) throws {
        try FileSystem.writeAtomically(bytes, to: blobs.path(of: id))
    }
}
