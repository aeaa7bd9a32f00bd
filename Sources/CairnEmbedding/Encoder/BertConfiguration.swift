import Foundation

/// The fields of a BERT `config.json` that the encoder uses.
public struct BertConfiguration: Sendable, Equatable, Codable {
    public var vocabularySize: Int
    public var hiddenSize: Int
    public var layerCount: Int
    public var headCount: Int
    public var intermediateSize: Int
    public var maximumPositions: Int
    public var typeVocabularySize: Int
    public var layerNormEpsilon: Float
    public var hiddenActivation: String

    enum CodingKeys: String, CodingKey {
        case vocabularySize = "vocab_size"
        case hiddenSize = "hidden_size"
        case layerCount = "num_hidden_layers"
        case headCount = "num_attention_heads"
        case intermediateSize = "intermediate_size"
        case maximumPositions = "max_position_embeddings"
        case typeVocabularySize = "type_vocab_size"
        case layerNormEpsilon = "layer_norm_eps"
        case hiddenActivation = "hidden_act"
    }

    public init(vocabularySize: Int, hiddenSize: Int, layerCount: Int, headCount: Int, intermediateSize: Int,
                maximumPositions: Int, typeVocabularySize: Int = 2, layerNormEpsilon: Float = 1e-12,
                hiddenActivation: String = "gelu") {
        self.vocabularySize = vocabularySize
        self.hiddenSize = hiddenSize
        self.layerCount = layerCount
        self.headCount = headCount
        self.intermediateSize = intermediateSize
        self.maximumPositions = maximumPositions
        self.typeVocabularySize = typeVocabularySize
        self.layerNormEpsilon = layerNormEpsilon
        self.hiddenActivation = hiddenActivation
    }

    /// Reads and checks `config.json`.
    public init(path: String) throws(EmbeddingError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw EmbeddingError(.modelNotFound, "cannot read model configuration \(path)")
        }
        let decoded: BertConfiguration
        do {
            decoded = try JSONDecoder().decode(BertConfiguration.self, from: data)
        } catch {
            throw EmbeddingError(.configMalformed, "model configuration \(path) is not a BERT config.json")
        }
        try decoded.validate()
        self = decoded
    }

    public func validate() throws(EmbeddingError) {
        guard hiddenSize > 0, layerCount > 0, headCount > 0, hiddenSize % headCount == 0,
              intermediateSize > 0, maximumPositions > 0, vocabularySize > 0, typeVocabularySize > 0 else {
            throw EmbeddingError(.configMalformed, "model configuration has inconsistent sizes")
        }
        guard hiddenActivation == "gelu" else {
            throw EmbeddingError(.configMalformed, "model activation \(hiddenActivation) is not supported (only gelu)")
        }
    }
}
