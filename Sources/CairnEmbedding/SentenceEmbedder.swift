import Foundation

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
    public var dimension: Int { encoder.configuration.hiddenSize }

    public init(tokenizer: WordPieceTokenizer, encoder: BertEncoder, maximumTokens: Int = defaultMaximumTokens) {
        self.tokenizer = tokenizer
        self.encoder = encoder
        self.maximumTokens = min(maximumTokens, encoder.maximumSequenceLength)
    }

    /// Loads `model.safetensors`, `vocab.txt` and `config.json` from `directory`.
    public convenience init(directory: String, maximumTokens: Int = defaultMaximumTokens) throws(EmbeddingError) {
        let path = { (name: String) in (directory as NSString).appendingPathComponent(name) }
        let configuration = try BertConfiguration(path: path(File.configuration))
        let weights = try SafeTensors(path: path(File.weights))
        let tokenizer = try WordPieceTokenizer(vocabularyPath: path(File.vocabulary))
        guard tokenizer.vocabulary.count <= configuration.vocabularySize else {
            throw EmbeddingError(.vocabularyMalformed, "vocabulary has \(tokenizer.vocabulary.count) tokens, the model \(configuration.vocabularySize)")
        }
        self.init(tokenizer: tokenizer, encoder: try BertEncoder(weights: weights, configuration: configuration),
                  maximumTokens: maximumTokens)
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
    /// `batchTokens` tokens, so short and long texts do not share work.
    public func embed(_ texts: [String], batchTokens: Int = 8192) -> [[Float]] {
        let encoded = texts.map { tokenizer.encode($0, maximumLength: maximumTokens) }
        return embed(tokenIDs: encoded, batchTokens: batchTokens)
    }

    /// Embeds one text.
    public func embed(_ text: String) -> [Float] {
        encoder.embed([tokenizer.encode(text, maximumLength: maximumTokens)])[0]
    }

    /// Embeds already tokenized sequences, in order.
    public func embed(tokenIDs encoded: [[Int32]], batchTokens: Int = 8192) -> [[Float]] {
        let order = encoded.indices.sorted { encoded[$0].count < encoded[$1].count }
        var result = [[Float]](repeating: [], count: encoded.count)
        var batch: [Int] = []
        var batchSize = 0
        func flush() {
            guard !batch.isEmpty else { return }
            for (index, vector) in zip(batch, encoder.embed(batch.map { encoded[$0] })) { result[index] = vector }
            batch.removeAll(keepingCapacity: true)
            batchSize = 0
        }
        for index in order {
            if batchSize + encoded[index].count > batchTokens { flush() }
            batch.append(index)
            batchSize += encoded[index].count
        }
        flush()
        return result
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
