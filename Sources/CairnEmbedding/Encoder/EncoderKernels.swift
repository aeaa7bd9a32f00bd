import CEncoderKernels

/// The encoder's kernels for one instruction set (Sources/CEncoderKernels): the linear layer on
/// packed weights that short sequences use, GELU, softmax and LayerNorm.
///
/// Swift compiles for the baseline x86-64 instruction set (SSE2), so element-wise loops written in
/// Swift run four floats at a time, without fused multiply-add. The kernels are C compiled three
/// times — for AVX-512, for AVX2 + FMA and for the baseline — and `best` picks the widest this
/// CPU runs, so one binary is fast on a new server and still runs on an old laptop.
public struct EncoderKernels: Sendable, CustomStringConvertible {
    public enum InstructionSet: Int32, Sendable, CaseIterable {
        case best = 0, baseline = 1, avx2 = 2, avx512 = 3
    }

    /// Points into a constant table in the C library; it is never written or freed.
    private nonisolated(unsafe) let table: UnsafePointer<cairn_encoder_kernels>

    /// The kernels for `set`, or nil when this CPU cannot run them.
    public init?(_ set: InstructionSet = .best) {
        guard let table = cairn_encoder_kernels_for(set.rawValue) else { return nil }
        self.table = table
    }

    /// The widest set this CPU runs (the baseline runs everywhere).
    public static var best: EncoderKernels { EncoderKernels(.best)! }

    /// Every set this CPU runs, widest last.
    public static var available: [EncoderKernels] {
        [InstructionSet.baseline, .avx2, .avx512].compactMap { EncoderKernels($0) }
    }

    /// "avx512", "avx2" or "baseline".
    public var description: String { String(cString: table.pointee.name) }

    /// Outputs per panel of a packed weight matrix.
    static let panelWidth = Int(CAIRN_PANEL_WIDTH)

    /// One linear layer's weights (outputs × inputs) and bias in the packed layout.
    struct PackedLinear: Sendable {
        let weight: [Float]
        let bias: [Float]
        let outputs: Int
        let inputs: Int
        var panels: Int { (outputs + EncoderKernels.panelWidth - 1) / EncoderKernels.panelWidth }

        init(weight: TensorFloats, bias: TensorFloats, outputs: Int, inputs: Int) {
            precondition(weight.count == outputs * inputs && bias.count == outputs)
            var packedWeight = [Float](repeating: 0, count: cairn_packed_weight_count(Int32(outputs), Int32(inputs)))
            var packedBias = [Float](repeating: 0, count: cairn_packed_bias_count(Int32(outputs)))
            packedWeight.withUnsafeMutableBufferPointer { w in
                packedBias.withUnsafeMutableBufferPointer { b in
                    cairn_pack_linear(weight.base, bias.base, Int32(outputs), Int32(inputs), w.baseAddress, b.baseAddress)
                }
            }
            self.weight = packedWeight
            self.bias = packedBias
            self.outputs = outputs
            self.inputs = inputs
        }
    }

    /// y[t][o] = (accumulate ? y[t][o] : 0) + bias[o] + Σᵢ x[t][i]·W[o][i] for the outputs of
    /// panels `panelRange` (row stride of y: `layer.outputs`).
    func linear(_ x: UnsafePointer<Float>, tokens: Int, layer: PackedLinear, panels panelRange: Range<Int>,
                into y: UnsafeMutablePointer<Float>, accumulate: Bool) {
        layer.weight.withUnsafeBufferPointer { w in
            layer.bias.withUnsafeBufferPointer { b in
                table.pointee.linear(x, Int32(tokens), Int32(layer.inputs), w.baseAddress, b.baseAddress, y,
                                     Int32(layer.outputs), Int32(layer.outputs), Int32(panelRange.lowerBound),
                                     Int32(panelRange.count), accumulate ? 1 : 0)
            }
        }
    }

    /// x ← GELU(x), the exact (erf) form.
    func gelu(_ x: UnsafeMutableBufferPointer<Float>) {
        guard let base = x.baseAddress else { return }
        table.pointee.gelu(base, x.count)
    }

    /// Softmax of each of `rows` rows of `columns` floats (row stride `stride`), in place.
    func softmaxRows(_ x: UnsafeMutablePointer<Float>, rows: Int, columns: Int, stride: Int) {
        table.pointee.softmax_rows(x, Int32(rows), Int32(columns), Int32(stride))
    }

    /// LayerNorm of each of `rows` rows of `gamma.count` floats, in place.
    func layerNorm(_ x: UnsafeMutablePointer<Float>, rows: Int, gamma: TensorFloats, beta: TensorFloats, epsilon: Float) {
        precondition(gamma.count == beta.count)
        table.pointee.layer_norm(x, Int32(rows), Int32(gamma.count), gamma.base, beta.base, epsilon)
    }
}
