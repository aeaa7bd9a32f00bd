import Foundation

/// A tiny BERT with random weights (hidden 8, 2 layers), written as real model files, so that
/// `cairn eval` publishes and cairnd embeds queries with the real encoder in milliseconds.
/// (The generator of Tests/CairnEmbeddingTests/TinyModel.swift, without CairnEmbedding types.)
enum TinyModel {
    static let vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "water", "boil", "##ing", "safe",
                             "flood", "map", "##s", ",", ".", "!", "a", "is", "to", "drink", "storm"]
    static let hidden = 8, intermediate = 16, layers = 2, positions = 16

    /// Writes model.safetensors, vocab.txt and config.json into `folder`.
    static func write(to folder: String, seed: UInt64 = 7) throws {
        var generator = SplitMix64(seed: seed)
        var tensors: [(String, [Int], [Float])] = []
        func add(_ name: String, _ shape: [Int], scale: Float = 0.5, offset: Float = 0) {
            let values = (0..<shape.reduce(1, *)).map { _ in offset + scale * (Float(generator.next() % 20_001) / 10_000 - 1) }
            tensors.append((name, shape, values))
        }
        let h = hidden
        add("embeddings.word_embeddings.weight", [vocabulary.count, h])
        add("embeddings.position_embeddings.weight", [positions, h])
        add("embeddings.token_type_embeddings.weight", [2, h])
        add("embeddings.LayerNorm.weight", [h], scale: 0.2, offset: 1)
        add("embeddings.LayerNorm.bias", [h], scale: 0.1)
        for layer in 0..<layers {
            let p = "encoder.layer.\(layer)."
            for part in ["query", "key", "value"] {
                add(p + "attention.self.\(part).weight", [h, h])
                add(p + "attention.self.\(part).bias", [h], scale: 0.1)
            }
            add(p + "attention.output.dense.weight", [h, h])
            add(p + "attention.output.dense.bias", [h], scale: 0.1)
            add(p + "attention.output.LayerNorm.weight", [h], scale: 0.2, offset: 1)
            add(p + "attention.output.LayerNorm.bias", [h], scale: 0.1)
            add(p + "intermediate.dense.weight", [intermediate, h])
            add(p + "intermediate.dense.bias", [intermediate], scale: 0.1)
            add(p + "output.dense.weight", [h, intermediate])
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
        var json = try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])
        while (8 + json.count) % 8 != 0 { json.append(UInt8(ascii: " ")) }
        var bytes = Data()
        withUnsafeBytes(of: UInt64(json.count).littleEndian) { bytes.append(contentsOf: $0) }
        bytes.append(json)
        for (_, _, values) in tensors {
            for value in values { withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) } }
        }
        try bytes.write(to: URL(fileURLWithPath: folder + "/model.safetensors"))
        try (vocabulary.joined(separator: "\n") + "\n").write(toFile: folder + "/vocab.txt", atomically: true, encoding: .utf8)
        let config: [String: Any] = [
            "vocab_size": vocabulary.count, "hidden_size": h, "num_hidden_layers": layers, "num_attention_heads": 2,
            "intermediate_size": intermediate, "max_position_embeddings": positions, "type_vocab_size": 2,
            "layer_norm_eps": 1e-12, "hidden_act": "gelu",
        ]
        try JSONSerialization.data(withJSONObject: config).write(to: URL(fileURLWithPath: folder + "/config.json"))
    }
}

/// A deterministic generator, so that a model can be rebuilt from its seed.
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
