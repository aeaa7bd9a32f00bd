import CairnTestSupport
import CairnCore
import CairnEmbedding
import CairnIndex
import CairnStore
import Foundation
import Logging
@testable import CairnPublish

/// A temporary publisher setup: a repository folder, a tiny model, a key and a cache file.
struct Workspace {
    let folder: String
    let repo: String
    let modelDir: String
    let keyDir: String
    let key: PublisherKey
    let cachePath: String
    let embedder: SentenceEmbedder
    let model: PublishedModel

    init() throws {
        folder = try TemporaryDirectory.make()
        repo = folder + "/repo"
        modelDir = try TinyModel(seed: 7).writeFolder()
        keyDir = folder + "/keys"
        key = try KeyFiles.generate(in: keyDir)
        cachePath = folder + "/cache.sqlite"
        embedder = try SentenceEmbedder(directory: modelDir)
        model = try PublishedModel(directory: modelDir, dimension: embedder.dimension, maxTokens: embedder.maximumTokens)
    }

    var repository: Repository { Repository(root: repo) }

    /// Writes `chunks` as a JSON array file under the workspace and returns its path.
    func writeSource(_ chunks: [Chunk], name: String = "kb.json") throws -> String {
        let path = folder + "/" + name
        let records: [[String: Any]] = chunks.map { chunk in
            var record: [String: Any] = ["id": chunk.id, "title": chunk.title, "content": chunk.content, "tags": chunk.tags]
            if let scenario = chunk.scenario { record["scenario"] = scenario }
            if let source = chunk.source { record["source"] = source }
            return record
        }
        try JSONSerialization.data(withJSONObject: records, options: [.sortedKeys]).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Publishes `source` in process with the tiny model.
    func publish(_ source: String, keepDeltas: Int = 5, canaries: [Canary] = [], cache: Bool = true,
                 cachePath: String? = nil, deltaFormat: Int = 2, signer: PublisherKey? = nil, stage: Bool = false,
                 channel: String = "stable", expiresAt: Timestamp? = nil) throws -> PublishReport {
        var configuration = PublishConfiguration(repository: repo, channel: channel, source: source,
                                                 keepDeltas: keepDeltas, canaries: canaries)
        configuration.deltaFormat = deltaFormat
        configuration.stage = stage
        configuration.expiresAt = expiresAt
        let publisher = Publisher(configuration: configuration, key: signer ?? key, embedder: embedder, model: model,
                                  cache: try cache ? EmbeddingCache(path: cachePath ?? self.cachePath) : nil,
                                  logger: Logger(label: "test"))
        return try publisher.publish()
    }

    /// The verified manifest of `version` (or the current one).
    func manifest(_ version: Int? = nil, signer: PublisherKey? = nil) throws -> Manifest {
        let path = version.map { repository.versionPath("stable", $0) } ?? repository.manifestPath("stable")
        return try repository.manifest(at: path, trustedKeys: [(signer ?? key).publicKey])
    }

    /// The records of a version's snapshot, checked against its state root.
    func records(_ version: Int, signer: PublisherKey? = nil) throws -> [ChunkRecord] {
        let manifest = try manifest(version, signer: signer)
        let file = folder + "/extract-\(UUID().uuidString).sqlite"
        try repository.extractSnapshot(of: manifest, to: file)
        return try SnapshotRecords.read(at: file, expectedStateRoot: manifest.stateRoot, dimension: manifest.dimension)
    }

    func verify() -> VerifyReport {
        RepositoryVerifier(repository: repository, trustedKeys: [key.publicKey]).verify()
    }
}

/// A small knowledge base whose words the tiny model partly knows.
enum SampleKB {
    static let words = ["water", "boil", "safe", "flood", "map", "drink", "storm", "the", "a", "is", "to",
                        "shelter", "radio", "battery", "torch", "bandage"]

    static func chunks(count: Int, seed: UInt64 = 1) -> [Chunk] {
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { index in
            let content = (0..<(8 + index % 7)).map { _ in words[Int(generator.next() % UInt64(words.count))] }
                .joined(separator: " ")
            return Chunk(id: "chunk-\(String(format: "%03d", index))", title: "Topic \(index)", content: content,
                         scenario: index % 2 == 0 ? "flood" : nil, tags: index % 3 == 0 ? ["water", "safety"] : [],
                         source: "sample")
        }
    }

    /// The repository's example knowledge base (examples/kb/knowledge-base.json).
    static var examplePath: String {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { url.deleteLastPathComponent() }
        return url.path + "/examples/kb/knowledge-base.json"
    }
}
