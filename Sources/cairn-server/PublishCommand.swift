import ArgumentParser
import CairnCore
import CairnEmbedding
import CairnPublish
import CairnStore
import Foundation

struct PublishCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish",
        abstract: "Publish a knowledge base as the channel's next signed version.",
        discussion: """
            SOURCE is a file or a folder (walked recursively, sorted, dotfiles skipped, symlinked \
            files read, symlinked folders not followed): .json (an array of {id, title, content, \
            scenario?, tags?, source?} records or BEIR {_id, title, text}), .jsonl (one record per \
            line), .md/.markdown/.txt (cut into chunks of about --chunk-words words overlapping by \
            --overlap-words; title = front matter's title:, else first heading outside code, else \
            file name; front matter and HTML comments are not text; id = <relative path>#<n>).

            Only chunks whose text changed are embedded: vectors come from earlier snapshots and \
            from the embedding cache (--cache, default ${XDG_CACHE_HOME:-~/.cache}/cairn/\
            embedding-cache.sqlite). Writes the snapshot, deltas from the last --keep-deltas \
            versions, the model files, versions/<n>.json and finally manifest.json; any failure \
            leaves the previous version current. A second publish to the same repository waits up \
            to --lock-wait seconds for the first, then refuses.

            Vectors computed elsewhere (a GPU machine running sentence-transformers with the same \
            model): --vectors FILE.npy, a NumPy array of float32 or float16 of shape (chunks, \
            dimension), row i the i-th chunk in reading order. Before anything is written, \
            --verify-sample rows (chosen from the file's bytes: the same file, the same rows) are \
            embedded with the shipped model; if any cosine is below 0.999 the publish is refused \
            (65) with a line naming the worst row. The embedding cache \
            is filled from the file.

            Keys: each --key signs the manifest. When the repository has a root of trust \
            (cairn-server root), every key must be one of its signing keys and at least its \
            threshold of them must sign; with --stage, fewer (or none) may: the blobs are written \
            and the signed manifest waits in staged/<channel>/<n>.json for cairn-server sign \
            (on any machine) and cairn-server release.

            Exit status: 0 published; 65 bad input (one line naming file, record and problem; \
            nothing published); 1 a canary query failed; 75 another publish holds the lock; 3 the \
            model cannot be loaded; 64 bad option or key file; 77 fewer signing keys than the \
            root's threshold; 74 I/O error.

            Test hook: CAIRN_PUBLISH_PAUSE_AT=<stage> (locked, embedded, snapshot-stored, \
            blobs-stored, version-written) makes publish print "paused at <stage>" on standard \
            error and block there until killed, so tests can kill it at a known point.
            """
    )

    @Option(help: "The repository folder (created if missing).")
    var repo: String
    @Option(help: "The channel, [a-z0-9][a-z0-9._-]{0,63}.")
    var channel: String
    @Option(help: "The knowledge base: a file or a folder.")
    var source: String
    @Option(help: "A signing key's private key file (from keygen). Repeatable: each one signs.")
    var key: [String] = []
    @Flag(help: "Write the blobs and the signed manifest to staged/<channel>/<n>.json without releasing it.")
    var stage = false
    @Option(name: .customLong("expires-at"), help: "The manifest's expiry, YYYY-MM-DDTHH:MM:SSZ (instead of --expires-days).")
    var expiresAt: String?
    @Option(help: "A canaries file: JSON array of {query, expect, k?, mode?}; the new version must pass them.")
    var canaries: String?
    @Option(name: .customLong("keep-deltas"), help: "Build deltas from this many earlier versions.")
    var keepDeltas = PublishConfiguration.defaultKeepDeltas
    @Option(name: .customLong("expires-days"), help: "Days until the manifest expires.")
    var expiresDays = 30
    @Option(name: .customLong("model-dir"), help: "Model folder (default $CAIRN_MODEL_DIR or ~/.cache/cairn/all-MiniLM-L6-v2).")
    var modelDir: String?
    @Option(help: "Embedding cache file.")
    var cache: String?
    @Option(help: "A .npy file of the chunks' vectors (float32 or float16, shape (chunks, dimension)), computed elsewhere with the same model.")
    var vectors: String?
    @Option(name: .customLong("verify-sample"), help: "With --vectors: rows re-embedded with the shipped model before anything is written.")
    var verifySample = 64
    @Option(name: .customLong("delta-format"), help: "Deltas of format 2 (with the set hash a device checks without a pass over its rows) or 1 (for devices with a cairnd from before 2026-11-29).")
    var deltaFormat = 2
    @Flag(name: .customLong("no-cache"), help: "Use no embedding cache (earlier snapshots are still reused).")
    var noCache = false
    @Option(name: .customLong("chunk-words"), help: "Target words per chunk of Markdown/text.")
    var chunkWords = 180
    @Option(name: .customLong("overlap-words"), help: "Words repeated between consecutive text chunks (at most half of --chunk-words).")
    var overlapWords = 30
    @Option(name: .customLong("lock-wait"), help: "Seconds to wait for another publish's lock.")
    var lockWait: Double = 5
    @Flag(help: "Log progress details.")
    var verbose = false

    func run() throws {
        followRepositoryReadability(repo)
        let logger = bootstrapLogging(verbose: verbose)
        let display = ProgressDisplay()
        do {
            guard chunkWords >= 1, (0...chunkWords / 2).contains(overlapWords) else {
                throw PublishError(.invalidArgument, "--overlap-words must be from 0 to half of --chunk-words (\(max(0, chunkWords / 2))), and --chunk-words at least 1")
            }
            let keys = try loadPrivate(key, outside: repo)
            var configuration = PublishConfiguration(
                repository: repo, channel: channel, source: source, keepDeltas: keepDeltas, expiresDays: expiresDays,
                chunking: ChunkingOptions(targetWords: chunkWords, overlapWords: overlapWords), lockWait: lockWait)
            if let canaries { configuration.canaries = try loadCanaries(canaries) }
            configuration.stage = stage
            configuration.vectors = vectors
            configuration.verifySample = verifySample
            configuration.deltaFormat = deltaFormat
            if let expiresAt {
                guard let time = Timestamp(rfc3339: expiresAt) else {
                    throw PublishError(.invalidArgument, "--expires-at must be an RFC 3339 UTC time like 2026-12-31T00:00:00Z")
                }
                configuration.expiresAt = time
            }
            let directory = modelDir ?? SentenceEmbedder.defaultDirectory()
            let embedder: SentenceEmbedder
            do { embedder = try SentenceEmbedder(directory: directory) } catch {
                throw PublishError(.model, "\(error.message) (model folder \(directory); run scripts/fetch-model)")
            }
            let model = try PublishedModel(directory: directory, dimension: embedder.dimension, maxTokens: embedder.maximumTokens)
            let cacheFile: EmbeddingCache? = try noCache ? nil : EmbeddingCache(path: cache ?? EmbeddingCache.defaultPath())
            let publisher = Publisher(configuration: configuration, keys: keys, embedder: embedder, model: model,
                                      cache: cacheFile, logger: logger, progress: { display.update($0) }, checkpoint: pauseIfAsked)
            let report = try publisher.publish()
            for skipped in report.skippedDeltas { printError("note: no delta from \(skipped)") }
            for warning in report.warnings { printError("warning: \(warning)") }
            print(report.summary)
        } catch let error as PublishError {
            display.endLine()
            throw fail(error)
        }
    }

    private func loadCanaries(_ path: String) throws(PublishError) -> [Canary] {
        let data: [UInt8]
        do { data = try FileSystem.read(path) } catch { throw PublishError(.io, error.message, cause: error) }
        do { return try Canary.parseFile(data) } catch {
            throw PublishError(.badInput, "\(path): \(error.message)", cause: error)
        }
    }
}

/// The test hook: blocks forever at the stage named by CAIRN_PUBLISH_PAUSE_AT, after saying so.
@Sendable func pauseIfAsked(_ stage: PublishStage) {
    guard ProcessInfo.processInfo.environment["CAIRN_PUBLISH_PAUSE_AT"] == stage.rawValue else { return }
    printError("paused at \(stage.rawValue) (CAIRN_PUBLISH_PAUSE_AT)")
    while true { pause() }
}
