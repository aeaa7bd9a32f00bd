// cairn-bench make-datadir --corpus FILE --replicate N --out DIR [--model-dir M] [--cache F]
//
// Writes a device data directory that cairnd serves as it is (the layout of DESIGN.md):
//   DIR/versions/1/index.sqlite   a CairnIndex snapshot of N chunks (see Corpus.chunk/vector)
//   DIR/versions/1/manifest.json  a manifest signed with a throwaway key (cairnd's start-up
//                                 recovery reads it; no repository holds its blobs)
//   DIR/versions/1/model -> ../../models/<sha256 of model.safetensors>
//   DIR/models/<sha256>/{model.safetensors,vocab.txt,config.json}  symlinks to the model folder
//   DIR/current -> versions/1
// Each document is embedded once with the real model (title + text, as the publisher does);
// `--cache` keeps those vectors (D × dimension float32) so that the 10k and 100k runs share them.
import CairnCore
import CairnEmbedding
import CairnIndex
import Foundation

func makeDataDir(_ arguments: [String]) throws {
    let corpusPath = try requiredOption("--corpus", in: arguments)
    let count = try intOption("--replicate", in: arguments, default: 10_000)
    let out = try requiredOption("--out", in: arguments)
    let modelDirectory = option("--model-dir", in: arguments) ?? SentenceEmbedder.defaultDirectory()
    let fileManager = FileManager.default
    guard !fileManager.fileExists(atPath: out) else { throw Failure(description: "\(out) exists; give a new folder") }

    let documents = try Corpus.read(corpusPath)
    guard !documents.isEmpty else { throw Failure(description: "\(corpusPath) holds no documents") }
    let embedder = try SentenceEmbedder(directory: modelDirectory)
    let dimension = embedder.dimension
    let clock = ContinuousClock()
    let start = clock.now
    let vectors = try documentVectors(documents, embedder: embedder, cache: option("--cache", in: arguments))
    let embedSeconds = milliseconds(clock.now - start) / 1e3

    let entries: [ChunkRecord] = (0..<count).map { i in
        let row = i % documents.count
        let base = vectors[row * dimension..<(row + 1) * dimension]
        return ChunkRecord(chunk: Corpus.chunk(i, of: documents), vector: Corpus.vector(base, copy: i / documents.count, seed: i))
    }
    let meta = SnapshotMeta(channel: "bench", version: 1, dimension: dimension, modelID: "all-MiniLM-L6-v2", entries: entries)
    let versionFolder = join(out, "versions", "1")
    try fileManager.createDirectory(atPath: versionFolder, withIntermediateDirectories: true)
    let writeStart = clock.now
    try SnapshotWriter.create(at: join(versionFolder, "index.sqlite"), meta: meta, entries: entries)
    let writeSeconds = milliseconds(clock.now - writeStart) / 1e3
    let weights = try Data(contentsOf: URL(fileURLWithPath: join(modelDirectory, SentenceEmbedder.File.weights)))
    try Data(installedManifest(meta: meta, weights: weights, indexPath: join(versionFolder, "index.sqlite")))
        .write(to: URL(fileURLWithPath: join(versionFolder, "manifest.json")))

    let modelFolder = join(out, "models", ContentID(hashing: weights).hex)
    try fileManager.createDirectory(atPath: modelFolder, withIntermediateDirectories: true)
    let absoluteModel = URL(fileURLWithPath: modelDirectory).standardizedFileURL.path
    for file in [SentenceEmbedder.File.weights, SentenceEmbedder.File.vocabulary, SentenceEmbedder.File.configuration] {
        try fileManager.createSymbolicLink(atPath: join(modelFolder, file), withDestinationPath: join(absoluteModel, file))
    }
    try fileManager.createSymbolicLink(atPath: join(versionFolder, "model"),
                                       withDestinationPath: "../../models/\((modelFolder as NSString).lastPathComponent)")
    try fileManager.createSymbolicLink(atPath: join(out, "current"), withDestinationPath: "versions/1")

    try printJSON([
        "chunks": count, "documents": documents.count, "dimension": dimension,
        "embed_seconds": embedSeconds, "snapshot_write_seconds": writeSeconds,
        "index_bytes": (try fileManager.attributesOfItem(atPath: join(versionFolder, "index.sqlite"))[.size] as? Int) ?? 0,
        "vector_bytes": count * dimension * 4, "model_bytes": weights.count,
    ])
}

/// A signed manifest for the version, as an installed version keeps it. Its blob hashes name
/// files no repository holds: the benchmark serves the index as it is.
private func installedManifest(meta: SnapshotMeta, weights: Data, indexPath: String) throws -> [UInt8] {
    let key = PublisherKey.generate()
    let now = Int64(Date().timeIntervalSince1970)
    let size = (try FileManager.default.attributesOfItem(atPath: indexPath)[.size] as? Int) ?? 0
    let manifest = Manifest(
        channel: meta.channel, version: meta.version,
        created: Timestamp(secondsSince1970: now)!, expires: Timestamp(secondsSince1970: now + 365 * 86_400)!,
        stateRoot: meta.stateRoot, chunkCount: meta.chunkCount, dimension: meta.dimension,
        model: Manifest.Model(id: meta.modelID, dimension: meta.dimension, maxTokens: 256,
                              files: [Manifest.ModelFile(name: SentenceEmbedder.File.weights, sha256: ContentID(hashing: weights),
                                                         size: weights.count)]),
        snapshot: Manifest.Snapshot(sha256: ContentID(hashing: Data()), size: size, uncompressedSize: size),
        publisherKeyID: key.keyID)
    return SignedManifest.encode(manifest, signingKey: key)
}

/// The documents' vectors, row after row: read from `cache` when it holds exactly D rows, else
/// embedded (batches of 64) and written there.
private func documentVectors(_ documents: [Document], embedder: SentenceEmbedder, cache: String?) throws -> [Float] {
    let expected = documents.count * embedder.dimension
    if let cache, FileManager.default.fileExists(atPath: cache) {
        let cached = try readFloats(cache)
        if cached.count == expected { return cached }
    }
    var vectors: [Float] = []
    vectors.reserveCapacity(expected)
    let texts = documents.map { Chunk(id: $0.id, title: $0.title, content: $0.text).embeddingText }
    for start in stride(from: 0, to: texts.count, by: 64) {
        for vector in embedder.embed(Array(texts[start..<min(texts.count, start + 64)])) { vectors += vector }
    }
    if let cache { try writeFloats(vectors, to: cache) }
    return vectors
}
