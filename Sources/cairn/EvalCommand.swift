import ArgumentParser
import CairnClient
import CairnCore
import CairnEmbedding
import CairnIndex
import CairnPublish
import Foundation

struct EvalCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "eval",
        abstract: "Measure retrieval quality on a BEIR test collection through a real cairnd.",
        discussion: """
            BEIR_DIR holds queries.jsonl ({_id, text}), qrels/<split>.tsv (query-id, corpus-id, \
            score) and corpus.jsonl (or give --corpus: any file `cairn-server publish` reads). \
            The corpus is published to a temporary repository with a new key (embeddings come \
            from the publisher's cache when present), a cairnd started from beside this cairn \
            syncs it, and every judged query is sent over the socket in modes lexical, dense, \
            hybrid and rrf (k = 100). Prints nDCG@10, Recall@10, Recall@100 and MRR@10 per mode \
            (linear gains, as trec_eval; means over the queries with a relevant judgment), and \
            writes one line per query and mode to --per-query. Every query is sent again with \
            k = 10, as users query, and the report says in how many queries each mode's first 10 \
            answers differ from the k = 100 answer's first 10 (the answer must not depend on k).

            Exit status: 0 done; 1 cairnd failed or did not install the version in time; 2 usage; \
            65 bad collection files; 66 the model cannot be loaded; 74 I/O error.
            """
    )

    @Argument(help: "The BEIR-format folder.")
    var folder: String
    @Option(help: "The qrels split: qrels/<split>.tsv.")
    var split = "test"
    @Option(help: "The corpus file, when it is not BEIR_DIR/corpus.jsonl.")
    var corpus: String?
    @Flag(help: "Print the table as JSON.")
    var json = false
    @Option(name: .customLong("per-query"), help: "Per-query results file (default ./eval-<collection>-per-query.jsonl).")
    var perQuery: String?
    @Option(name: .customLong("model-dir"), help: "Model folder (default $CAIRN_MODEL_DIR or ~/.cache/cairn/all-MiniLM-L6-v2).")
    var modelDir: String?
    @Option(help: "Embedding cache file (default the publisher's).")
    var cache: String?
    @Flag(name: .customLong("no-cache"), help: "Embed every chunk, using no cache.")
    var noCache = false
    @Option(help: "Take this repository instead of publishing (with --channel and --trusted-key).")
    var repo: String?
    @Option(help: "The channel of --repo.")
    var channel: String?
    @Option(name: .customLong("trusted-key"), help: "The publisher's public key file for --repo.")
    var trustedKey: String?
    @Option(help: "Deal the corpus into this many channels (document i to channel i mod N), all followed by one cairnd, to measure search across channels against one channel.")
    var channels = 1
    @Option(name: .customLong("approximate-dense-above"), help: "cairnd's approximate_dense_above: narrow dense search by sign bits above this many chunks (0 always, never for exact search; default cairnd's).")
    var approximateDenseAbove: String?
    @Option(name: .customLong("approximate-lexical-above"), help: "cairnd's approximate_lexical_above: prune lexical search to the rarest words' rows above this many chunks (0 always, never for the full search; default cairnd's).")
    var approximateLexicalAbove: String?
    @Option(name: .customLong("lexical-postings-above"), help: "cairnd's lexical_postings_above: above --approximate-lexical-above, score a query whose words are in more than this many rows from FTS5's postings (0 always, never for pruning alone; default cairnd's).")
    var lexicalPostingsAbove: String?
    @Option(name: .customLong("lexical-words"), help: "cairnd's lexical_words: score at most this many of a query's words, the rarest (default cairnd's).")
    var lexicalWords: Int?
    @Option(name: .customLong("sync-timeout"), help: "Seconds to wait for cairnd to serve the version.")
    var syncTimeout: Double = 600
    @Flag(help: "Keep the temporary folder (repository, data directory, cairnd.log) and print its path.")
    var keep = false

    func validate() throws {
        if repo != nil && (channel == nil || trustedKey == nil) { throw ValidationError("--repo needs --channel and --trusted-key") }
        if repo == nil && (channel != nil || trustedKey != nil) { throw ValidationError("--channel and --trusted-key go with --repo") }
        guard syncTimeout > 0 else { throw ValidationError("--sync-timeout must be positive") }
        guard (1...16).contains(channels) else { throw ValidationError("--channels must be 1 to 16") }
        if repo != nil && channels > 1 { throw ValidationError("--channels publishes its own repository; it does not go with --repo") }
        // The three take what cairnd's configuration takes: a number of rows, or never.
        for (option, value) in [("--approximate-dense-above", approximateDenseAbove), ("--approximate-lexical-above", approximateLexicalAbove),
                                ("--lexical-postings-above", lexicalPostingsAbove)] {
            if let value, CairndConfigFile.rows(value) == nil { throw ValidationError("\(option) must be 0 or more, or never") }
        }
        if let lexicalWords, lexicalWords < 1 { throw ValidationError("--lexical-words must be at least 1") }
    }

    func run() async throws {
        EvalInterruption.install()
        do { try await evaluate() } catch {
            // Interrupted, the run fails as its cairnd stops: the handler's exit (130) stands.
            EvalInterruption.yieldToInterruption()
            if let failure = error as? EvalFailure { throw failure.report() }
            throw error
        }
        // Interrupted as its last answers came, the run may end while the handler stops cairnd:
        // the handler's exit stands then too, not 0.
        EvalInterruption.yieldToInterruption()
    }

    private func evaluate() async throws {
        let loaded = try EvalCollection.load(folder: folder, split: split, corpus: corpus)
        let scratch = try makeScratch()
        let finish = ScratchEnd(path: scratch, keep: keep)
        EvalInterruption.onInterrupt { finish.run() }
        defer {
            EvalInterruption.onInterrupt(nil)
            finish.run()
        }

        var repository: EvalRepository
        var others: [EvalRepository] = []
        if let repo, let channel, let trustedKey {
            repository = try EvalRepository.open(root: repo, channel: channel, trustedKeyPath: trustedKey)
        } else {
            let prepared = try loaded.publishableCorpus(scratch: scratch)
            if prepared.dropped > 0 { progress("\(prepared.dropped) documents with empty text left out (they cannot be published)") }
            let parts = channels == 1 ? [prepared.path] : try EvalCollection.split(prepared.path, into: channels, scratch: scratch)
            var published: [EvalRepository] = []
            for (index, part) in parts.enumerated() {
                published.append(try EvalRepository.publish(corpus: part, scratch: scratch,
                                                             modelDirectory: modelDir ?? SentenceEmbedder.defaultDirectory(),
                                                             cache: noCache ? nil : cache ?? EmbeddingCache.defaultPath(),
                                                             channel: index == 0 ? "eval" : "eval-\(index + 1)"))
            }
            repository = published[0]
            others = Array(published.dropFirst())
        }

        let data = scratch + "/data"
        let root = URL(fileURLWithPath: repository.root).standardizedFileURL.path
        var arguments = ["--channel", repository.channel, "--source", SourceURL.forFolder(root),
                         "--trusted-key", repository.trustedKeyPath, "--poll-interval", "1"]
        // cairnd's search settings given on the command line, then the further channels, as a
        // device would follow them: [channel NAME] sections.
        let settings: [(key: String, value: String?)] = [
            ("approximate_dense_above", approximateDenseAbove),
            ("approximate_lexical_above", approximateLexicalAbove),
            ("lexical_postings_above", lexicalPostingsAbove),
            ("lexical_words", lexicalWords.map(String.init)),
        ]
        let given = settings.compactMap { setting in setting.value.map { "\(setting.key) = \($0)\n" } }
        // Always a file of its own, even empty: without --config cairnd reads the device's
        // /etc/cairn/cairnd.conf, whose channels and search settings would be measured too.
        let config = scratch + "/cairnd.conf"
        let text = given + others.map { "[channel \($0.channel)]\nsource = \(SourceURL.forFolder(root))\ntrusted_key = \($0.trustedKeyPath)\npoll_interval = 1\n" }
        guard FileManager.default.createFile(atPath: config, contents: Data(text.joined().utf8)) else { throw EvalFailure.io("cannot write \(config)") }
        arguments += ["--config", config]
        let daemon = try DaemonProcess(dataDirectory: data, socketPath: scratch + "/s", arguments: arguments)
        EvalInterruption.onInterrupt {
            daemon.stop()
            finish.run()
        }
        try daemon.start()
        defer { daemon.stop() }
        try await daemon.waitForVersion(repository.manifest.version, deadline: syncTimeout)
        try await daemon.waitForChannels(others.map(\.channel), deadline: syncTimeout)
        let documents = ([repository] + others).map(\.manifest.chunkCount).reduce(0, +)

        let queries = loaded.collection.judgedQueries
        let modes: [SearchRequest.Mode] = [.lexical, .dense, .hybrid, .rrf]
        progress("sending \(queries.count) queries × \(modes.count) modes to cairnd")
        let jobs = modes.flatMap { mode in queries.map { (query: $0, mode: mode) } }
        let outcomes = try await QueryRunner(socketPath: daemon.socketPath, k: 100).run(jobs)
        // The same queries as a user sends them (k = 10): the answer must not depend on k.
        let shallow = try await QueryRunner(socketPath: daemon.socketPath, k: 10).run(jobs)
        daemon.stop()

        let name = others.isEmpty ? loaded.name : "\(loaded.name) in \(others.count + 1) channels"
        var report = EvalReport(collection: name, documents: documents, modes: modes,
                                queries: queries, judgments: loaded.collection.judgments, outcomes: outcomes)
        report.compare(atK10: shallow, with: outcomes, queries: queries.count)
        let perQueryPath = perQuery ?? FileManager.default.currentDirectoryPath + "/eval-\(loaded.name)-per-query.jsonl"
        // The results first: a per-query file that cannot be written (a folder not the user's)
        // must not lose a run that took minutes.
        print(json ? try report.json() : report.table)
        try report.writePerQuery(to: perQueryPath)
        progress("per-query results in \(perQueryPath)")
    }

    private func makeScratch() throws(EvalFailure) -> String {
        var template = Array((NSTemporaryDirectory() as NSString).appendingPathComponent("cairn-eval-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw .io("cannot create a temporary folder") }
        return String(cString: made)
    }
}
