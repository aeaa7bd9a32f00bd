import CairnCore
public import CairnEmbedding
public import Foundation

/// A tiny BERT with random weights, written as real model files by the tests, so that every
/// part that embeds (encoder, publisher, daemon, sync) runs the real code in milliseconds where
/// the 90 MB model is absent; `naiveEmbedding` is the plain reference the encoder must match.
public struct TinyModel: Sendable {
    public static let vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "water", "boil", "##ing", "safe",
                             "flood", "map", "##s", ",", ".", "!", "a", "is", "to", "drink", "storm"]
    public static let configuration = BertConfiguration(vocabularySize: 20, hiddenSize: 8, layerCount: 2, headCount: 2,
                                          intermediateSize: 16, maximumPositions: 16)
    public var configuration: BertConfiguration { Self.configuration }
    public static var dimension: Int { configuration.hiddenSize }
    public var tensors: [(name: String, shape: [Int], values: [Float])] = []

    public init(seed: UInt64) {
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

    public func tensor(_ name: String) -> [Float] { tensors.first { $0.name == name }!.values }

    /// The safetensors bytes: header length, JSON header (padded to 8 bytes), F32 data.
    public var safetensorsBytes: Data {
        var header: [String: Any] = ["__metadata__": ["format": "pt"]]
        var offset = 0
        for tensor in tensors {
            let size = tensor.values.count * 4
            header[tensor.name] = ["dtype": "F32", "shape": tensor.shape, "data_offsets": [offset, offset + size]]
            offset += size
        }
        return Self.safetensors(header: header, data: tensors.flatMap(\.values))
    }

    public static func safetensors(header: [String: Any], data: [Float]) -> Data {
        var json = try! JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])
        while (8 + json.count) % 8 != 0 { json.append(UInt8(ascii: " ")) }
        var bytes = Data()
        withUnsafeBytes(of: UInt64(json.count).littleEndian) { bytes.append(contentsOf: $0) }
        bytes.append(json)
        for value in data { withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) } }
        return bytes
    }

    /// Writes model.safetensors, vocab.txt and config.json into a new temporary folder.
    public func writeFolder() throws -> String {
        let folder = try TemporaryDirectory.make()
        try writeFiles(to: folder)
        return folder
    }

    /// Writes a model made from `seed` into `folder` (created if missing).
    public static func write(to folder: String, seed: UInt64 = 7) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try TinyModel(seed: seed).writeFiles(to: folder)
    }

    /// `model.safetensors`, `vocab.txt` and `config.json` with their bytes (for a repository
    /// that serves the model as blobs).
    public static func files(seed: UInt64) -> [(name: String, bytes: [UInt8])] {
        let model = TinyModel(seed: seed)
        return [("model.safetensors", Array(model.safetensorsBytes)),
                ("vocab.txt", Array((vocabulary.joined(separator: "\n") + "\n").utf8)),
                ("config.json", Array(try! configurationJSON))]
    }

    func writeFiles(to folder: String) throws {
        try safetensorsBytes.write(to: URL(fileURLWithPath: folder + "/model.safetensors"))
        try (Self.vocabulary.joined(separator: "\n") + "\n").write(toFile: folder + "/vocab.txt", atomically: true, encoding: .utf8)
        try Self.configurationJSON.write(to: URL(fileURLWithPath: folder + "/config.json"))
    }

    /// config.json's bytes, the same at every call (keys sorted): models made from one seed are
    /// one model, whose folder name channels share.
    static var configurationJSON: Data {
        get throws {
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            return try encoder.encode(configuration)
        }
    }

    /// The model computed the plain way, in Double, one sequence at a time with loops: the
    /// reference the BLAS encoder must agree with.
    public func naiveEmbedding(_ ids: [Int32]) -> [Double] {
        let h = configuration.hiddenSize, heads = configuration.headCount, d = h / heads
        let eps = Double(configuration.layerNormEpsilon)
        let n = ids.count
        func t(_ name: String) -> [Double] { tensor(name).map(Double.init) }
        func layerNorm(_ x: [Double], _ g: [Double], _ b: [Double]) -> [Double] {
            let mean = x.reduce(0, +) / Double(x.count)
            let variance = x.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(x.count)
            return x.indices.map { (x[$0] - mean) / (variance + eps).squareRoot() * g[$0] + b[$0] }
        }
        func linear(_ x: [Double], _ w: [Double], _ b: [Double], outputs: Int) -> [Double] {
            (0..<outputs).map { o in b[o] + x.indices.reduce(0) { $0 + x[$1] * w[o * x.count + $1] } }
        }
        let word = t("embeddings.word_embeddings.weight"), position = t("embeddings.position_embeddings.weight")
        let type = t("embeddings.token_type_embeddings.weight")
        var x: [[Double]] = (0..<n).map { p in
            let raw = (0..<h).map { word[Int(ids[p]) * h + $0] + position[p * h + $0] + type[$0] }
            return layerNorm(raw, t("embeddings.LayerNorm.weight"), t("embeddings.LayerNorm.bias"))
        }
        for layer in 0..<configuration.layerCount {
            let p = "encoder.layer.\(layer)."
            func dense(_ v: [Double], _ name: String, _ outputs: Int) -> [Double] {
                linear(v, t(p + name + ".weight"), t(p + name + ".bias"), outputs: outputs)
            }
            let q = x.map { dense($0, "attention.self.query", h) }
            let k = x.map { dense($0, "attention.self.key", h) }
            let v = x.map { dense($0, "attention.self.value", h) }
            var context = [[Double]](repeating: [Double](repeating: 0, count: h), count: n)
            for head in 0..<heads {
                for a in 0..<n {
                    var scores = (0..<n).map { b in
                        (0..<d).reduce(0) { $0 + q[a][head * d + $1] * k[b][head * d + $1] } / Double(d).squareRoot()
                    }
                    let top = scores.max()!
                    scores = scores.map { Foundation.exp($0 - top) }
                    let sum = scores.reduce(0, +)
                    for c in 0..<d {
                        context[a][head * d + c] = (0..<n).reduce(0) { $0 + scores[$1] / sum * v[$1][head * d + c] }
                    }
                }
            }
            x = (0..<n).map { a in
                let attended = dense(context[a], "attention.output.dense", h)
                let y = layerNorm(zip(x[a], attended).map(+), t(p + "attention.output.LayerNorm.weight"),
                                  t(p + "attention.output.LayerNorm.bias"))
                let inner = dense(y, "intermediate.dense", configuration.intermediateSize).map {
                    $0 * 0.5 * (1 + Foundation.erf($0 / 2.0.squareRoot()))
                }
                return layerNorm(zip(y, dense(inner, "output.dense", h)).map(+), t(p + "output.LayerNorm.weight"),
                                 t(p + "output.LayerNorm.bias"))
            }
        }
        let pooled = (0..<h).map { c in x.reduce(0) { $0 + $1[c] } / Double(n) }
        let norm = pooled.reduce(0) { $0 + $1 * $1 }.squareRoot()
        return pooled.map { $0 / norm }
    }
}

/// Test folders, each made inside one folder per test process (`mkdtemp`: unique), which
/// is removed when the process exits, so that runs of the suite do not fill the temporary folder
/// (some tests copy the 87 MB model; each run of the suite before 2026-11-27 left hundreds of
/// folders). Set `CAIRN_KEEP_TEST_FILES=1` to keep it for a look after a failure.
public enum TemporaryDirectory {
    // Short: Unix socket paths (at most 107 bytes) are made inside its folders.
    private static let root: String = {
        var template = Array((NSTemporaryDirectory() + "cairn-t-XXXXXX").utf8CString)
        guard mkdtemp(&template) != nil else { fatalError("cannot make a test folder in \(NSTemporaryDirectory())") }
        let path = String(cString: template)
        // Open to others, as the test folders were before: nginx's workers serve from them.
        chmod(path, 0o755)
        if ProcessInfo.processInfo.environment["CAIRN_KEEP_TEST_FILES"] != "1" {
            atexit { try? FileManager.default.removeItem(atPath: TemporaryDirectory.root) }
        }
        return path
    }()

    public static func make() throws -> String {
        let path = root + "/" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}

/// Runs `body` with a fresh test folder (`TemporaryDirectory.make`), removed afterwards.
public func withTestFolder<T>(_ body: (String) throws -> T) throws -> T {
    let path = try TemporaryDirectory.make()
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try body(path)
}
