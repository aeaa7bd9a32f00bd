import Foundation

/// A BERT encoder with mean pooling and L2 normalisation: token ids in, unit vectors out.
///
/// A batch is packed, not padded: the linear layers run on all tokens of all sequences as one
/// matrix (one sgemm each), and attention runs per sequence and head on its own length, so no
/// work is spent on padding and no mask is needed.
public final class BertEncoder: Sendable {
    struct Layer: Sendable {
        /// Query, key and value weights stacked: (3·hidden) × hidden, row-major (out × in).
        var qkvWeight: [Float]
        var qkvBias: [Float]
        var attentionOutputWeight: [Float]
        var attentionOutputBias: [Float]
        var attentionNormGamma: [Float]
        var attentionNormBeta: [Float]
        var intermediateWeight: [Float]
        var intermediateBias: [Float]
        var outputWeight: [Float]
        var outputBias: [Float]
        var outputNormGamma: [Float]
        var outputNormBeta: [Float]
    }

    public let configuration: BertConfiguration
    let wordEmbeddings: [Float]
    let positionEmbeddings: [Float]
    let tokenTypeEmbeddings: [Float]
    let embeddingNormGamma: [Float]
    let embeddingNormBeta: [Float]
    let layers: [Layer]
    let blas: BLAS

    /// Loads and checks every tensor of `configuration` from `weights`.
    public init(weights: SafeTensors, configuration: BertConfiguration) throws(EmbeddingError) {
        try configuration.validate()
        self.configuration = configuration
        blas = try BLAS.shared
        let h = configuration.hiddenSize
        let i = configuration.intermediateSize
        // Checkpoints saved from BertModel have no prefix; from BertForX they have "bert.".
        let prefix = weights.tensors["embeddings.word_embeddings.weight"] == nil
            && weights.tensors["bert.embeddings.word_embeddings.weight"] != nil ? "bert." : ""
        func tensor(_ name: String, _ shape: [Int]) throws(EmbeddingError) -> [Float] {
            try weights.floats(prefix + name, shape: shape)
        }
        wordEmbeddings = try tensor("embeddings.word_embeddings.weight", [configuration.vocabularySize, h])
        positionEmbeddings = try tensor("embeddings.position_embeddings.weight", [configuration.maximumPositions, h])
        tokenTypeEmbeddings = try tensor("embeddings.token_type_embeddings.weight", [configuration.typeVocabularySize, h])
        embeddingNormGamma = try tensor("embeddings.LayerNorm.weight", [h])
        embeddingNormBeta = try tensor("embeddings.LayerNorm.bias", [h])
        var layers: [Layer] = []
        for index in 0..<configuration.layerCount {
            let p = "encoder.layer.\(index)."
            layers.append(Layer(
                qkvWeight: try tensor(p + "attention.self.query.weight", [h, h])
                    + tensor(p + "attention.self.key.weight", [h, h])
                    + tensor(p + "attention.self.value.weight", [h, h]),
                qkvBias: try tensor(p + "attention.self.query.bias", [h])
                    + tensor(p + "attention.self.key.bias", [h])
                    + tensor(p + "attention.self.value.bias", [h]),
                attentionOutputWeight: try tensor(p + "attention.output.dense.weight", [h, h]),
                attentionOutputBias: try tensor(p + "attention.output.dense.bias", [h]),
                attentionNormGamma: try tensor(p + "attention.output.LayerNorm.weight", [h]),
                attentionNormBeta: try tensor(p + "attention.output.LayerNorm.bias", [h]),
                intermediateWeight: try tensor(p + "intermediate.dense.weight", [i, h]),
                intermediateBias: try tensor(p + "intermediate.dense.bias", [i]),
                outputWeight: try tensor(p + "output.dense.weight", [h, i]),
                outputBias: try tensor(p + "output.dense.bias", [h]),
                outputNormGamma: try tensor(p + "output.LayerNorm.weight", [h]),
                outputNormBeta: try tensor(p + "output.LayerNorm.bias", [h])))
        }
        self.layers = layers
    }

    /// The longest sequence the position table allows.
    public var maximumSequenceLength: Int { configuration.maximumPositions }

    /// Mean-pooled, L2-normalised embeddings of `sequences` (token ids, each including its
    /// special tokens), one `hiddenSize` vector per sequence, in order.
    /// - Parameter parallelism: threads that share each matrix product, by splitting its output
    ///   columns (and so its weights) between them. For one short query, where a product is
    ///   too small for OpenBLAS's own threads but reading the weights dominates; batch callers
    ///   that already run several batches at once leave it at 1.
    public func embed(_ sequences: [[Int32]], parallelism: Int = 1) -> [[Float]] {
        let h = configuration.hiddenSize
        let lengths = sequences.map { min($0.count, maximumSequenceLength) }
        let total = lengths.reduce(0, +)
        guard total > 0 else { return sequences.map { _ in [Float](repeating: 0, count: h) } }
        var offsets: [Int] = []
        var running = 0
        for length in lengths {
            offsets.append(running)
            running += length
        }
        var hidden = [Float](repeating: 0, count: total * h)
        hidden.withUnsafeMutableBufferPointer { x in
            embedTokens(sequences, lengths: lengths, offsets: offsets, into: x.baseAddress!)
            var scratch = Scratch(tokens: total, configuration: configuration, longest: lengths.max() ?? 0)
            for layer in layers {
                run(layer, on: x.baseAddress!, tokens: total, lengths: lengths, offsets: offsets,
                    parallelism: max(1, parallelism), scratch: &scratch)
            }
        }
        return zip(lengths, offsets).map { length, offset in
            meanPoolNormalized(hidden, offset: offset, length: length)
        }
    }

    struct Scratch {
        var qkv: [Float]
        var context: [Float]
        var intermediate: [Float]
        var scores: [Float]

        init(tokens: Int, configuration: BertConfiguration, longest: Int) {
            qkv = [Float](repeating: 0, count: tokens * 3 * configuration.hiddenSize)
            context = [Float](repeating: 0, count: tokens * configuration.hiddenSize)
            intermediate = [Float](repeating: 0, count: tokens * configuration.intermediateSize)
            scores = [Float](repeating: 0, count: longest * longest)
        }
    }

    private func embedTokens(_ sequences: [[Int32]], lengths: [Int], offsets: [Int], into x: UnsafeMutablePointer<Float>) {
        let h = configuration.hiddenSize
        let vocabularySize = configuration.vocabularySize
        for (sequence, (length, offset)) in zip(sequences, zip(lengths, offsets)) {
            for position in 0..<length {
                // An id outside the vocabulary (a foreign tokenizer) is read as [UNK]-like row 0
                // rather than out of bounds.
                let token = Int(sequence[position])
                let row = token >= 0 && token < vocabularySize ? token : 0
                let out = x + (offset + position) * h
                for d in 0..<h {
                    out[d] = wordEmbeddings[row * h + d] + positionEmbeddings[position * h + d] + tokenTypeEmbeddings[d]
                }
            }
        }
        VectorMath.layerNorm(x, rows: lengths.reduce(0, +), width: h, gamma: embeddingNormGamma,
                             beta: embeddingNormBeta, epsilon: configuration.layerNormEpsilon)
    }

    /// y = x · Wᵀ + bias (+ y if `accumulate`), with x tokens × inputs and W outputs × inputs;
    /// with `parallelism` > 1 the output columns are split between that many threads.
    private func linear(_ x: UnsafePointer<Float>, tokens: Int, inputs: Int, weight: [Float], parallelism: Int = 1,
                        bias: [Float], into y: UnsafeMutablePointer<Float>, outputs: Int, accumulate: Bool) {
        weight.withUnsafeBufferPointer { w in
            bias.withUnsafeBufferPointer { b in
                let parts = min(parallelism, max(1, outputs / 64))
                let slice = (outputs + parts - 1) / parts
                // Each part writes its own columns of y: no two threads touch the same floats.
                let operands = LinearOperands(x: x, weights: w.baseAddress!, biases: b.baseAddress!, output: y)
                let blas = self.blas
                let work: @Sendable (Int) -> Void = { part in
                    let x = operands.x, weights = operands.weights, biases = operands.biases
                    let first = part * slice, count = min(slice, outputs - first)
                    guard count > 0 else { return }
                    for t in 0..<tokens {
                        let row = operands.output + t * outputs + first
                        for o in 0..<count { row[o] = (accumulate ? row[o] : 0) + biases[first + o] }
                    }
                    blas.sgemm(transB: true, m: tokens, n: count, k: inputs, a: x, lda: inputs,
                               b: weights + first * inputs, ldb: inputs, beta: 1,
                               c: operands.output + first, ldc: outputs)
                }
                if parts == 1 { work(0) } else { DispatchQueue.concurrentPerform(iterations: parts, execute: work) }
            }
        }
    }

    private func run(_ layer: Layer, on x: UnsafeMutablePointer<Float>, tokens: Int, lengths: [Int], offsets: [Int],
                     parallelism: Int,
                     scratch: inout Scratch) {
        let h = configuration.hiddenSize
        let heads = configuration.headCount
        let headSize = h / heads
        let scale = 1 / Float(headSize).squareRoot()
        let epsilon = configuration.layerNormEpsilon
        scratch.qkv.withUnsafeMutableBufferPointer { qkv in
            scratch.context.withUnsafeMutableBufferPointer { context in
                scratch.scores.withUnsafeMutableBufferPointer { scores in
                    let qkv = qkv.baseAddress!, context = context.baseAddress!, scores = scores.baseAddress!
                    linear(x, tokens: tokens, inputs: h, weight: layer.qkvWeight, parallelism: parallelism, bias: layer.qkvBias,
                           into: qkv, outputs: 3 * h, accumulate: false)
                    for (length, offset) in zip(lengths, offsets) where length > 0 {
                        let rows = qkv + offset * 3 * h
                        for head in 0..<heads {
                            let q = rows + head * headSize
                            let k = rows + h + head * headSize
                            let v = rows + 2 * h + head * headSize
                            // scores = scale · Q Kᵀ  (length × length)
                            blas.sgemm(transB: true, m: length, n: length, k: headSize, alpha: scale,
                                       a: q, lda: 3 * h, b: k, ldb: 3 * h, c: scores, ldc: length)
                            VectorMath.softmaxRows(scores, rows: length, columns: length, stride: length)
                            // context[:, head] = P V
                            blas.sgemm(m: length, n: headSize, k: length, a: scores, lda: length,
                                       b: v, ldb: 3 * h, c: context + offset * h + head * headSize, ldc: h)
                        }
                    }
                    // x ← LayerNorm(x + context · Woᵀ + bo)
                    linear(context, tokens: tokens, inputs: h, weight: layer.attentionOutputWeight,
                           parallelism: parallelism, bias: layer.attentionOutputBias, into: x, outputs: h, accumulate: true)
                    VectorMath.layerNorm(x, rows: tokens, width: h, gamma: layer.attentionNormGamma,
                                         beta: layer.attentionNormBeta, epsilon: epsilon)
                }
            }
        }
        let i = configuration.intermediateSize
        scratch.intermediate.withUnsafeMutableBufferPointer { intermediate in
            linear(x, tokens: tokens, inputs: h, weight: layer.intermediateWeight, parallelism: parallelism, bias: layer.intermediateBias,
                   into: intermediate.baseAddress!, outputs: i, accumulate: false)
            VectorMath.gelu(UnsafeMutableBufferPointer(rebasing: intermediate[0..<(tokens * i)]))
            // x ← LayerNorm(x + GELU(·) · W2ᵀ + b2)
            linear(intermediate.baseAddress!, tokens: tokens, inputs: i, weight: layer.outputWeight,
                   parallelism: parallelism, bias: layer.outputBias, into: x, outputs: h, accumulate: true)
        }
        VectorMath.layerNorm(x, rows: tokens, width: h, gamma: layer.outputNormGamma,
                             beta: layer.outputNormBeta, epsilon: epsilon)
    }

    private func meanPoolNormalized(_ hidden: [Float], offset: Int, length: Int) -> [Float] {
        let h = configuration.hiddenSize
        var pooled = [Float](repeating: 0, count: h)
        guard length > 0 else { return pooled }
        for t in offset..<(offset + length) {
            for d in 0..<h { pooled[d] += hidden[t * h + d] }
        }
        var norm: Float = 0
        for d in 0..<h {
            pooled[d] /= Float(length)
            norm += pooled[d] * pooled[d]
        }
        let inverse = 1 / max(norm.squareRoot(), 1e-12)
        for d in 0..<h { pooled[d] *= inverse }
        return pooled
    }
}

/// The pointers of one `linear` call, handed to its `concurrentPerform` workers.
struct LinearOperands: @unchecked Sendable {
    // @unchecked: the workers only read x, weights and biases, write disjoint columns of
    // output, and the call returns only after all of them have finished.
    let x: UnsafePointer<Float>
    let weights: UnsafePointer<Float>
    let biases: UnsafePointer<Float>
    let output: UnsafeMutablePointer<Float>
}
