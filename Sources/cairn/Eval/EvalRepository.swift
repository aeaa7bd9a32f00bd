import CairnCore
import CairnEmbedding
import CairnPublish
import Foundation
import Logging

/// The repository `cairnd` syncs from in an evaluation: a new one, published here from the
/// collection's corpus, or one given with `--repo`.
struct EvalRepository {
    var root: String
    var channel: String
    var trustedKeyPath: String
    /// The channel's current version, which cairnd must install before the queries are sent.
    var manifest: Manifest

    /// Generates a key in `scratch/keys` (or takes the one there), then publishes `corpus` as
    /// version 1 of `channel` in `scratch/repo` with the real Publisher (embeddings cached in
    /// `cache`, if any).
    static func publish(corpus: String, scratch: String, modelDirectory: String,
                        cache: String?, channel: String = "eval") throws(EvalFailure) -> EvalRepository {
        do {
            let keyPath = scratch + "/keys/publisher.key"
            let key = FileManager.default.fileExists(atPath: keyPath)
                ? try KeyFiles.loadPrivate(keyPath) : try KeyFiles.generate(in: scratch + "/keys")
            let embedder: SentenceEmbedder
            do { embedder = try SentenceEmbedder(directory: modelDirectory) } catch {
                throw EvalFailure(66, "\(error.message) (model folder \(modelDirectory); run scripts/fetch-model)")
            }
            let model = try PublishedModel(directory: modelDirectory, dimension: embedder.dimension,
                                           maxTokens: embedder.maximumTokens)
            let configuration = PublishConfiguration(repository: scratch + "/repo", channel: channel, source: corpus)
            let cacheFile = try cache.map { (path) throws(PublishError) in try EmbeddingCache(path: path) }
            let started = Date()
            // Only warnings, on standard error: standard output carries the results.
            var logger = Logger(label: "cairn.eval", factory: { StreamLogHandler.standardError(label: $0) })
            logger.logLevel = .warning
            let publisher = Publisher(configuration: configuration, key: key, embedder: embedder, model: model,
                                      cache: cacheFile, logger: logger, progress: { step in
                                          if step.finished || step.done % 1024 < 64 {
                                              progress("read \(step.done) chunks, \(step.embedded) embedded")
                                          }
                                      })
            let report = try publisher.publish()
            progress(report.summary + String(format: " in %.0f s", Date().timeIntervalSince(started)))
            return try open(root: configuration.repository, channel: channel, trustedKeyPath: scratch + "/keys/publisher.pub")
        } catch let error as PublishError {
            throw EvalFailure(error.code == .badInput ? 65 : error.code == .model ? 66 : 74, error.message)
        } catch {
            throw (error as? EvalFailure) ?? .io("publishing failed: \(error)")
        }
    }

    /// An existing repository: its channel's current manifest, verified with the key.
    static func open(root: String, channel: String, trustedKeyPath: String) throws(EvalFailure) -> EvalRepository {
        do {
            let key = try KeyFiles.loadPublic(trustedKeyPath)
            let repository = Repository(root: root)
            let manifest = try repository.manifest(at: repository.manifestPath(channel), trustedKeys: [key])
            return EvalRepository(root: root, channel: channel, trustedKeyPath: trustedKeyPath, manifest: manifest)
        } catch {
            // A key file that is not a public key, or a manifest it does not verify: the data is bad.
            throw EvalFailure(error.code == .invalidArgument ? 65 : 74, error.message)
        }
    }
}
