import Foundation
import CairnEmbedding

/// A tiny BERT with random weights, written as a real safetensors file, so that publishing runs
/// the real encoder in milliseconds (copied from CairnEmbeddingTests, without its reference).
struct TinyModel {
    static let vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "water", "boil", "##ing", "safe",
                             "flood", "map", "##s", ",", ".", "!", "a", "is", "to", "drink", "storm"]
    let configuration = BertConfiguration(vocabularySize: 20, hiddenSize: 8, layerCount: 2, headCount: 2,
                                          intermediateSize: 16, maximumPositions: 16)
    var tensors: [(name: String, shape: [Int], values: [Float])] = []

    init(seed: UInt64) {
        var generator = SplitMix64(seed: seed)
        let h = configuration.hiddenSize, i = configuration.intermediateSize
        func random(_ shape: [Int], scale: Float = 0.5, offset: Float = 0) -> [Float] {
            (0..<shape.reduce(1, *)).map { _ in offset + scale * (Float(generator.next() % 20_001) / 10_000 - 1) }
        }
        func add(_ name: String, _ shape: [Int], scale: Float = 0.5, offset: Float = 0) {
            tensors.append((name, shape, random(shape, scale: scale, offset: offset)))
        }
        add("embeddings.word_embeddings.weight", [configuration.vocabularySize, h])
        add("embeddings.position_embeddings.weight", [configuration.maximumPositions, h])
        add("embeddings.token_type_embeddings.weight", [2, h])
        add("embeddings.LayerNorm.weight", [h], scale: 0.2, offset: 1)
        add("embeddings.LayerNorm.bias", [h], scale: 0.1)
        for layer in 0..<configuration.layerCount {
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
    }

    func tensor(_ name: String) -> [Float] { tensors.first { $0.name == name }!.values }

    /// The safetensors bytes: header length, JSON header (padded to 8 bytes), F32 data.
    var safetensorsBytes: Data {
        var header: [String: Any] = ["__metadata__": ["format": "pt"]]
        var offset = 0
        for tensor in tensors {
            let size = tensor.values.count * 4
            header[tensor.name] = ["dtype": "F32", "shape": tensor.shape, "data_offsets": [offset, offset + size]]
            offset += size
        }
        return Self.safetensors(header: header, data: tensors.flatMap(\.values))
    }

    static func safetensors(header: [String: Any], data: [Float]) -> Data {
        var json = try! JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])
        while (8 + json.count) % 8 != 0 { json.append(UInt8(ascii: " ")) }
        var bytes = Data()
        withUnsafeBytes(of: UInt64(json.count).littleEndian) { bytes.append(contentsOf: $0) }
        bytes.append(json)
        for value in data { withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) } }
        return bytes
    }

    /// Writes model.safetensors, vocab.txt and config.json into a new temporary folder.
    func writeFolder() throws -> String {
        let folder = try TemporaryDirectory.make()
        try safetensorsBytes.write(to: URL(fileURLWithPath: folder + "/model.safetensors"))
        try (Self.vocabulary.joined(separator: "\n") + "\n").write(toFile: folder + "/vocab.txt", atomically: true, encoding: .utf8)
        let config = try JSONEncoder().encode(configuration)
        try config.write(to: URL(fileURLWithPath: folder + "/config.json"))
        return folder
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

enum TemporaryDirectory {
    static func make() throws -> String {
        let path = NSTemporaryDirectory() + "cairn-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}
