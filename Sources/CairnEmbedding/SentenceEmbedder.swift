public import Foundation

/// Text in, unit vectors out: the WordPiece tokenizer and the BERT encoder of one model folder.
public final class SentenceEmbedder: Sendable {
    /// The files a model folder holds.
    public enum File {
        public static let weights = "model.safetensors"
        public static let vocabulary = "vocab.txt"
        public static let configuration = "config.json"
    }

    /// Tokens per sequence, including [CLS] and [SEP] (the model's `max_seq_length`).
    public static let defaultMaximumTokens = 256

    public let tokenizer: WordPieceTokenizer
    public let encoder: BertEncoder
    public let maximumTokens: Int
    /// The files it was loaded from (`filesIdentity(of:)`); nil for one built from parts.
    public let files: String?
    public var dimension: Int { encoder.configuration.hiddenSize }

    public init(tokenizer: WordPieceTokenizer, encoder: BertEncoder, maximumTokens: Int = defaultMaximumTokens,
                files: String? = nil) {
        self.tokenizer = tokenizer
        self.encoder = encoder
        self.maximumTokens = min(maximumTokens, encoder.maximumSequenceLength)
        self.files = files
    }

    /// The device and inode of each file of the model folder `directory`: another when the
    /// folder was replaced at the same path (removed as damaged and downloaded again), so that
    /// an embedder still mapping the old files is not taken for one of the new.
    public static func filesIdentity(of directory: String) -> String {
        [File.weights, File.vocabulary, File.configuration].map { name in
            var info = stat()
            guard stat((directory as NSString).appendingPathComponent(name), &info) == 0 else { return "-" }
            return "\(info.st_dev):\(info.st_ino)"
        }.joined(separator: " ")
    }

    /// Whether it was loaded from the files `directory` holds now.
    public func isLoaded(from directory: String) -> Bool {
        files == Self.filesIdentity(of: directory)
    }

    /// Loads `model.safetensors`, `vocab.txt` and `config.json` from `directory`.
    /// - Parameter kernels: the encoder's kernels (default: the widest instruction set this CPU runs).
    public convenience init(directory: String, maximumTokens: Int = defaultMaximumTokens,
                            kernels: EncoderKernels = .best) throws(EmbeddingError) {
        let path = { (name: String) in (directory as NSString).appendingPathComponent(name) }
        // Taken before the files are read: a folder replaced meanwhile reads as another.
        let files = Self.filesIdentity(of: directory)
        let configuration = try BertConfiguration(path: path(File.configuration))
        let weights = try SafeTensors(path: path(File.weights))
        let tokenizer = try WordPieceTokenizer(vocabularyPath: path(File.vocabulary))
        guard tokenizer.vocabulary.count <= configuration.vocabularySize else {
            throw EmbeddingError(.vocabularyMalformed, "vocabulary has \(tokenizer.vocabulary.count) tokens, the model \(configuration.vocabularySize)")
        }
        self.init(tokenizer: tokenizer,
                  encoder: try BertEncoder(weights: weights, configuration: configuration, kernels: kernels),
                  maximumTokens: maximumTokens, files: files)
    }

    /// The model folder to use: `CAIRN_MODEL_DIR`, else `$XDG_CACHE_HOME/cairn/all-MiniLM-L6-v2`,
    /// else `~/.cache/cairn/all-MiniLM-L6-v2` (where `scripts/fetch-model` puts it).
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let explicit = environment["CAIRN_MODEL_DIR"], !explicit.isEmpty { return explicit }
        let cache = environment["XDG_CACHE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ((environment["HOME"] ?? NSHomeDirectory()) as NSString).appendingPathComponent(".cache")
        return ((cache as NSString).appendingPathComponent("cairn") as NSString).appendingPathComponent("all-MiniLM-L6-v2")
    }

    /// Embeds `texts`, in order. Texts are grouped by token count into batches of at most
    /// `batchTokens` tokens, so short and long texts do not share work, and the batches run on
    /// `workers` threads at once (default: one per core). Each worker's matrix products run on
    /// one OpenBLAS thread: on small per-head products OpenBLAS's own threads cost more than they
    /// give, while whole batches in parallel keep every core busy.
    public func embed(_ texts: [String], batchTokens: Int = 4096, workers: Int? = nil) -> [[Float]] {
        let encoded = texts.map { tokenizer.encode($0, maximumLength: maximumTokens) }
        return embed(tokenIDs: encoded, batchTokens: batchTokens, workers: workers)
    }

    /// Embeds one text (a query), with its matrix products split over every core.
    public func embed(_ text: String) -> [Float] {
        encoder.embed([tokenizer.encode(text, maximumLength: maximumTokens)],
                      parallelism: ProcessInfo.processInfo.activeProcessorCount)[0]
    }

    /// What the batches running at once may hold together: with one batch per core, 4,096
    /// tokens each (57 MB with this model), a 32-core publisher held 1.8 GB; there, batches
    /// are made smaller instead (never below one sequence).
    public static let batchMemoryBudget = 512 << 20

    /// The tokens of a batch: `requested`, or fewer when `running` batches of it would pass
    /// `batchMemoryBudget`; never fewer than `longest` (one whole sequence).
    static func batchTokens(_ requested: Int, running: Int, bytesPerToken: Int, longest: Int) -> Int {
        min(requested, max(longest, batchMemoryBudget / (max(1, running) * max(1, bytesPerToken))))
    }

    /// Embeds already tokenized sequences, in order (see `embed(_:batchTokens:workers:)`).
    public func embed(tokenIDs encoded: [[Int32]], batchTokens: Int = 4096, workers: Int? = nil) -> [[Float]] {
        let running = max(1, workers ?? ProcessInfo.processInfo.activeProcessorCount)
        let batchTokens = Self.batchTokens(batchTokens, running: running, bytesPerToken: encoder.bytesPerBatchToken,
                                           longest: maximumTokens)
        let order = encoded.indices.sorted { encoded[$0].count < encoded[$1].count }
        var grouping: [[Int]] = [[]]
        var batchSize = 0
        for index in order {
            if batchSize + encoded[index].count > batchTokens, !grouping[grouping.count - 1].isEmpty {
                grouping.append([])
                batchSize = 0
            }
            grouping[grouping.count - 1].append(index)
            batchSize += encoded[index].count
        }
        let batches = grouping
        let results = Results(count: encoded.count)
        let workerCount = max(1, min(running, batches.count))
        let encoder = self.encoder
        // Worker w takes batches w, w + workerCount, …: sorted by length, so each gets a fair share.
        DispatchQueue.concurrentPerform(iterations: workerCount) { worker in
            for batch in stride(from: worker, to: batches.count, by: workerCount).map({ batches[$0] }) {
                for (index, vector) in zip(batch, encoder.embed(batch.map { encoded[$0] })) {
                    results.set(index, vector)
                }
            }
        }
        return results.values
    }

    /// Output slots written by several workers, each slot by exactly one of them.
    private final class Results: @unchecked Sendable {
        // @unchecked: every index is written by one worker only, and read only after
        // concurrentPerform has returned, which orders all writes before the read. The slots
        // are raw memory, not an array, whose mutation from several threads is a race even at
        // distinct indices (its uniqueness check and write-back).
        private let storage: UnsafeMutableBufferPointer<[Float]>
        init(count: Int) {
            storage = .allocate(capacity: count)
            storage.initialize(repeating: [])
        }
        deinit {
            storage.deinitialize()
            storage.deallocate()
        }
        func set(_ index: Int, _ vector: [Float]) { storage[index] = vector }
        var values: [[Float]] { Array(storage) }
    }

    /// Cosine similarity of two vectors (the dot product when both are unit vectors).
    public static func cosine(_ a: [Float], _ b: [Float]) -> Float {
        var dot: Float = 0, na: Float = 0, nb: Float = 0
        for (x, y) in zip(a, b) {
            dot += x * y
            na += x * x
            nb += y * y
        }
        return dot / max((na * nb).squareRoot(), 1e-12)
    }
}
