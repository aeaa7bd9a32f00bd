import CairnEmbedding
import Foundation

/// A tiny BERT with random weights (copied from CairnEmbeddingTests' generator, trimmed): the
/// model files a test repository serves as blobs, like the real publisher serves MiniLM.
struct TinyModel {
    static let vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "water", "boil", "##ing", "safe",
                             "flood", "map", "##s", ",", ".", "!", "a", "is", "to", "drink", "storm"]
    static let configuration = BertConfiguration(vocabularySize: 20, hiddenSize: 8, layerCount: 2, headCount: 2,
                                                 intermediateSize: 16, maximumPositions: 16)

    /// `model.safetensors`, `vocab.txt` and `config.json` with their bytes.
    static func files(seed: UInt64) -> [(name: String, bytes: [UInt8])] {
        var generator = SplitMix64(seed: seed)
        let c = configuration, h = c.hiddenSize, i = c.intermediateSize
        var tensors: [(String, [Int], [Float])] = []
        func add(_ name: String, _ shape: [Int], scale: Float = 0.5, offset: Float = 0) {
            let values = (0..<shape.reduce(1, *)).map { _ in offset + scale * (Float(generator.next() % 20_001) / 10_000 - 1) }
            tensors.append((name, shape, values))
        }
        add("embeddings.word_embeddings.weight", [c.vocabularySize, h])
        add("embeddings.position_embeddings.weight", [c.maximumPositions, h])
        add("embeddings.token_type_embeddings.weight", [2, h])
        add("embeddings.LayerNorm.weight", [h], scale: 0.2, offset: 1)
        add("embeddings.LayerNorm.bias", [h], scale: 0.1)
        for layer in 0..<c.layerCount {
            let p = "encoder.layer.\(layer)."
            for part in ["query", "key", "value"] {
                add(p + "attention.self.\(part).weight", [h, h])
                add(p + "attention.self.\(part).bias", [h], scale: 0.1)
            }
            add(p + "attention.output.dense.weight", [h, h])
            add(p + "attention.output.dense.bias", [h], scale: 0.1)
            add(p + "attention.output.LayerNorm.weight", [h], scale: 0.2, offset: 1)
            add(p + "attention.output.LayerNorm.bias", [h], scale: 0.1)
            add(p + "intermediate.dense.weight", [i, h])
            add(p + "intermediate.dense.bias", [i], scale: 0.1)
            add(p + "output.dense.weight", [h, i])
            add(p + "output.dense.bias", [h], scale: 0.1)
            add(p + "output.LayerNorm.weight", [h], scale: 0.2, offset: 1)
            add(p + "output.LayerNorm.bias", [h], scale: 0.1)
        }
        var header: [String: Any] = ["__metadata__": ["format": "pt"]]
        var offset = 0
        for (name, shape, values) in tensors {
            header[name] = ["dtype": "F32", "shape": shape, "data_offsets": [offset, offset + values.count * 4]]
            offset += values.count * 4
        }
        var json = try! JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])
        while (8 + json.count) % 8 != 0 { json.append(UInt8(ascii: " ")) }
        var weights = [UInt8]()
        withUnsafeBytes(of: UInt64(json.count).littleEndian) { weights.append(contentsOf: $0) }
        weights.append(contentsOf: json)
        for (_, _, values) in tensors {
            for value in values { withUnsafeBytes(of: value.bitPattern.littleEndian) { weights.append(contentsOf: $0) } }
        }
        return [("model.safetensors", weights),
                ("vocab.txt", Array((vocabulary.joined(separator: "\n") + "\n").utf8)),
                ("config.json", Array(try! JSONEncoder().encode(configuration)))]
    }
}

/// A deterministic generator, so that a failing case can be reproduced from its seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
