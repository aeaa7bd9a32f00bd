import CairnBLAS
import CairnThreads
import Foundation
import Synchronization

/// A BERT encoder with mean pooling and L2 normalisation: token ids in, unit vectors out.
///
/// A batch is packed, not padded: the linear layers run on all tokens of all sequences as one
/// matrix (one sgemm each), and attention runs per sequence and head on its own length, so no
/// work is spent on padding and no mask is needed.
///
/// Short inputs (a query: at most `packedKernelMaximumTokens` tokens in the call) take another
/// route through the linear layers. An sgemm call re-packs its operands, and with 16 tokens that
/// means copying all ~42 MB of layer weights on every query: most of its time. For them the
/// encoder packs the weights once (on first use) into 32-output panels and runs its own kernel
/// (EncoderKernels) over them; batches stay on OpenBLAS, whose blocking wins on large products.
public final class BertEncoder: Sendable {
    /// One layer's weights: read in place from the model file's mapping (`TensorFloats`), except
    /// the query, key and value weights, stacked into one copy for one product.
    struct Layer: Sendable {
        /// Query, key and value weights stacked: (3·hidden) × hidden, row-major (out × in).
        var qkvWeight: TensorFloats
        var qkvBias: TensorFloats
        var attentionOutputWeight: TensorFloats
        var attentionOutputBias: TensorFloats
        var attentionNormGamma: TensorFloats
        var attentionNormBeta: TensorFloats
        var intermediateWeight: TensorFloats
        var intermediateBias: TensorFloats
        var outputWeight: TensorFloats
        var outputBias: TensorFloats
        var outputNormGamma: TensorFloats
        var outputNormBeta: TensorFloats
    }

    public let configuration: BertConfiguration
    let wordEmbeddings: TensorFloats
    let positionEmbeddings: TensorFloats
    let tokenTypeEmbeddings: TensorFloats
    let embeddingNormGamma: TensorFloats
    let embeddingNormBeta: TensorFloats
    /// One layer's linear weights in the packed layout of the short-sequence kernel.
    struct PackedLayer: Sendable {
        let qkv: EncoderKernels.PackedLinear
        let attentionOutput: EncoderKernels.PackedLinear
        let intermediate: EncoderKernels.PackedLinear
        let output: EncoderKernels.PackedLinear
    }

    let layers: [Layer]
    let blas: BLAS
    /// GELU, softmax, LayerNorm and the short-sequence linear kernel, for this CPU.
    public let kernels: EncoderKernels
    /// Packed on the first short call: a process that only embeds batches (publishing) never
    /// holds the second copy of the weights.
    private let packed = Mutex<[PackedLayer]?>(nil)

    /// Calls with at most this many tokens in all take the packed-weight kernel.
    public static let packedKernelMaximumTokens = 64

    /// Loads and checks every tensor of `configuration` from `weights`.
    /// - Parameter kernels: the instruction set of the encoder's own kernels (default: the
    ///   widest this CPU runs; tests pass each in turn).
    public init(weights: SafeTensors, configuration: BertConfiguration,
                kernels: EncoderKernels = .best) throws(EmbeddingError) {
        try configuration.validate()
        self.configuration = configuration
        self.kernels = kernels
        do { blas = try BLAS.shared } catch { throw EmbeddingError(.blasUnavailable, error.message) }
        let h = configuration.hiddenSize
        let i = configuration.intermediateSize
        // Checkpoints saved from BertModel have no prefix; from BertForX they have "bert.".
        let prefix = weights.tensors["embeddings.word_embeddings.weight"] == nil
            && weights.tensors["bert.embeddings.word_embeddings.weight"] != nil ? "bert." : ""
        func tensor(_ name: String, _ shape: [Int]) throws(EmbeddingError) -> TensorFloats {
            try weights.tensor(prefix + name, shape: shape)
        }
        func stacked(_ names: [String], _ shape: [Int]) throws(EmbeddingError) -> TensorFloats {
            var parts: [TensorFloats] = []
            for name in names { parts.append(try tensor(name, shape)) }
            return TensorFloats(stacking: parts)
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
                qkvWeight: try stacked(["query", "key", "value"].map { p + "attention.self.\($0).weight" }, [h, h]),
                qkvBias: try stacked(["query", "key", "value"].map { p + "attention.self.\($0).bias" }, [h]),
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
        let packedLayers = total <= Self.packedKernelMaximumTokens ? packedLayers() : nil
        hidden.withUnsafeMutableBufferPointer { x in
            embedTokens(sequences, lengths: lengths, offsets: offsets, into: x.baseAddress!)
            var scratch = Scratch(tokens: total, configuration: configuration, longest: lengths.max() ?? 0)
            for (index, layer) in layers.enumerated() {
                run(layer, packed: packedLayers?[index], on: x.baseAddress!, tokens: total, lengths: lengths,
                    offsets: offsets, parallelism: max(1, parallelism), scratch: &scratch)
            }
        }
        return zip(lengths, offsets).map { length, offset in
            meanPoolNormalized(hidden, offset: offset, length: length)
        }
    }

    /// The layers' weights in the packed layout, packed on the first call.
    private func packedLayers() -> [PackedLayer] {
        packed.withLock { cached in
            if let cached { return cached }
            let h = configuration.hiddenSize, i = configuration.intermediateSize
            let made = layers.map { layer in
                PackedLayer(
                    qkv: .init(weight: layer.qkvWeight, bias: layer.qkvBias, outputs: 3 * h, inputs: h),
                    attentionOutput: .init(weight: layer.attentionOutputWeight, bias: layer.attentionOutputBias,
                                           outputs: h, inputs: h),
                    intermediate: .init(weight: layer.intermediateWeight, bias: layer.intermediateBias,
                                        outputs: i, inputs: h),
                    output: .init(weight: layer.outputWeight, bias: layer.outputBias, outputs: h, inputs: i))
            }
            cached = made
            return made
        }
    }

    /// The bytes `embed` holds per token of a batch: the hidden states and `Scratch`'s arrays
    /// (queries, keys and values, the context, the intermediate layer).
    public var bytesPerBatchToken: Int {
        (5 * configuration.hiddenSize + configuration.intermediateSize) * MemoryLayout<Float>.stride
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
        kernels.layerNorm(x, rows: lengths.reduce(0, +), gamma: embeddingNormGamma, beta: embeddingNormBeta,
                          epsilon: configuration.layerNormEpsilon)
    }

    /// y = x · Wᵀ + bias (+ y if `accumulate`), with x tokens × inputs and W outputs × inputs;
    /// with `parallelism` > 1 the output columns are split between that many threads. With
    /// `packed` weights the packed kernel runs instead of sgemm.
    private func linear(_ x: UnsafePointer<Float>, tokens: Int, inputs: Int, weight: TensorFloats,
                        packed: EncoderKernels.PackedLinear?, parallelism: Int = 1,
                        bias: TensorFloats, into y: UnsafeMutablePointer<Float>, outputs: Int, accumulate: Bool) {
        if let packed {
            // Each chunk computes whole panels, so its own columns of y; with one thread, one
            // chunk. Two panels a chunk: small enough that a busy helper holds the caller up
            // little, large enough that claiming one is noise.
            let chunks = min(parallelism, WorkerTeam.shared.width) > 1 ? (packed.panels + 1) / 2 : 1
            let operands = LinearOperands(x: x, output: y)
            let kernels = self.kernels
            let work: @Sendable (Int) -> Void = { chunk in
                let first = packed.panels * chunk / chunks, end = packed.panels * (chunk + 1) / chunks
                kernels.linear(operands.x, tokens: tokens, layer: packed, panels: first..<end,
                               into: operands.output, accumulate: accumulate)
            }
            WorkerTeam.shared.run(chunks: chunks, work)
            return
        }
        let parts = min(parallelism, WorkerTeam.shared.width, max(1, outputs / 64))
        let slice = (outputs + parts - 1) / parts
        // Each part writes its own columns of y: no two threads touch the same floats.
        let operands = LinearOperands(x: x, output: y)
        let blas = self.blas
        let work: @Sendable (Int) -> Void = { part in
            let first = part * slice, count = min(slice, outputs - first)
            guard count > 0 else { return }
            for t in 0..<tokens {
                let row = operands.output + t * outputs + first
                for o in 0..<count { row[o] = (accumulate ? row[o] : 0) + bias[first + o] }
            }
            blas.sgemm(transB: true, m: tokens, n: count, k: inputs, a: operands.x, lda: inputs,
                       b: weight.base + first * inputs, ldb: inputs, beta: 1,
                       c: operands.output + first, ldc: outputs)
        }
        WorkerTeam.shared.run(chunks: parts, work)
    }

    private func run(_ layer: Layer, packed: PackedLayer?, on x: UnsafeMutablePointer<Float>, tokens: Int,
                     lengths: [Int], offsets: [Int], parallelism: Int, scratch: inout Scratch) {
        let h = configuration.hiddenSize
        let heads = configuration.headCount
        let headSize = h / heads
        let scale = 1 / Float(headSize).squareRoot()
        let epsilon = configuration.layerNormEpsilon
        scratch.qkv.withUnsafeMutableBufferPointer { qkv in
            scratch.context.withUnsafeMutableBufferPointer { context in
                scratch.scores.withUnsafeMutableBufferPointer { scores in
                    let qkv = qkv.baseAddress!, context = context.baseAddress!, scores = scores.baseAddress!
                    linear(x, tokens: tokens, inputs: h, weight: layer.qkvWeight, packed: packed?.qkv,
                           parallelism: parallelism, bias: layer.qkvBias,
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
                            kernels.softmaxRows(scores, rows: length, columns: length, stride: length)
                            // context[:, head] = P V
                            blas.sgemm(m: length, n: headSize, k: length, a: scores, lda: length,
                                       b: v, ldb: 3 * h, c: context + offset * h + head * headSize, ldc: h)
                        }
                    }
                    // x ← LayerNorm(x + context · Woᵀ + bo)
                    linear(context, tokens: tokens, inputs: h, weight: layer.attentionOutputWeight,
                           packed: packed?.attentionOutput, parallelism: parallelism, bias: layer.attentionOutputBias, into: x, outputs: h, accumulate: true)
                    kernels.layerNorm(x, rows: tokens, gamma: layer.attentionNormGamma,
                                      beta: layer.attentionNormBeta, epsilon: epsilon)
                }
            }
        }
        let i = configuration.intermediateSize
        scratch.intermediate.withUnsafeMutableBufferPointer { intermediate in
            linear(x, tokens: tokens, inputs: h, weight: layer.intermediateWeight, packed: packed?.intermediate,
                   parallelism: parallelism, bias: layer.intermediateBias,
                   into: intermediate.baseAddress!, outputs: i, accumulate: false)
            kernels.gelu(UnsafeMutableBufferPointer(rebasing: intermediate[0..<(tokens * i)]))
            // x ← LayerNorm(x + GELU(·) · W2ᵀ + b2)
            linear(intermediate.baseAddress!, tokens: tokens, inputs: i, weight: layer.outputWeight,
                   packed: packed?.output, parallelism: parallelism, bias: layer.outputBias, into: x, outputs: h, accumulate: true)
        }
        kernels.layerNorm(x, rows: tokens, gamma: layer.outputNormGamma, beta: layer.outputNormBeta,
                          epsilon: epsilon)
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

/// The input and output of one `linear` call, handed to the `WorkerTeam` threads that run its chunks.
struct LinearOperands: @unchecked Sendable {
    // @unchecked: the chunks only read x, write disjoint columns of output, and the call
    // returns only after all of them have finished.
    let x: UnsafePointer<Float>
    let output: UnsafeMutablePointer<Float>
}

