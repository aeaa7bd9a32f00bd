/// Element-wise kernels of the encoder: the matrix products go to OpenBLAS, and these are what
/// is left (GELU, softmax, LayerNorm). They are plain loops over floats with no calls, branches
/// or integer conversions inside, so that the compiler vectorises them.
enum VectorMath {
    /// e^x, accurate to about 2 ulp for x in [-87, 88]: x = n·ln2 + r, a degree-6 polynomial for
    /// e^r on |r| ≤ ln2/2, and 2^n built in the exponent bits. n is rounded with the 1.5·2²³
    /// trick: adding it leaves n in the low bits of the float, with no conversion instruction.
    @inline(__always)
    static func exp(_ input: Float) -> Float {
        let x = min(max(input, -87.3), 88.3)
        let shifted = x * 1.442_695_04 + 12_582_912
        let n = shifted - 12_582_912
        // Cody–Waite: ln2 split in two so that x − n·ln2 keeps its low bits.
        let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6
        var p: Float = 1.0 / 720
        p = p * r + 1.0 / 120
        p = p * r + 1.0 / 24
        p = p * r + 1.0 / 6
        p = p * r + 0.5
        p = p * r + 1
        p = p * r + 1
        // bits(shifted) = 0x4B40_0000 + n, so the biased exponent n + 127 is bits − 0x4B3F_FF81.
        return p * Float(bitPattern: (shifted.bitPattern &- 0x4B3F_FF81) &<< 23)
    }

    /// erf(x) with absolute error below 3e-7: Abramowitz & Stegun 7.1.26 (1.5e-7), with
    /// t = 1/(1 + p|x|) and e^(−x²) from `exp`.
    @inline(__always)
    static func erf(_ x: Float) -> Float {
        let a = Float(bitPattern: x.bitPattern & 0x7FFF_FFFF)
        let t = 1 / (1 + 0.327_591_1 * a)
        var poly: Float = 1.061_405_429
        poly = poly * t - 1.453_152_027
        poly = poly * t + 1.421_413_741
        poly = poly * t - 0.284_496_736
        poly = poly * t + 0.254_829_592
        let y = 1 - poly * t * exp(-a * a)
        // Copy x's sign onto y.
        return Float(bitPattern: y.bitPattern | (x.bitPattern & 0x8000_0000))
    }

    /// x ← x · ½(1 + erf(x/√2)), the exact GELU of BERT.
    static func gelu(_ buffer: UnsafeMutableBufferPointer<Float>) {
        guard let x = buffer.baseAddress else { return }
        for index in 0..<buffer.count {
            let value = x[index]
            x[index] = value * 0.5 * (1 + erf(value * 0.707_106_77))
        }
    }

    /// Σ x[0..<count], with sixteen partial sums: a float reduction written as one running sum
    /// cannot be vectorised, because reordering it changes the rounding.
    @inline(__always)
    static func sum(_ x: UnsafePointer<Float>, count: Int) -> Float {
        var partial = SIMD16<Float>(repeating: 0)
        var index = 0
        let raw = UnsafeRawPointer(x)
        while index + 16 <= count {
            partial += raw.loadUnaligned(fromByteOffset: index * 4, as: SIMD16<Float>.self)
            index += 16
        }
        var total = partial.sum()
        while index < count {
            total += x[index]
            index += 1
        }
        return total
    }

    /// Softmax of each of `rows` rows of length `columns` (row stride `stride`), in place.
    static func softmaxRows(_ pointer: UnsafeMutablePointer<Float>, rows: Int, columns: Int, stride: Int) {
        for row in 0..<rows {
            let values = pointer + row * stride
            var maximum = -Float.greatestFiniteMagnitude
            for index in 0..<columns { maximum = max(maximum, values[index]) }
            for index in 0..<columns { values[index] = exp(values[index] - maximum) }
            let scale = 1 / sum(values, count: columns)
            for index in 0..<columns { values[index] *= scale }
        }
    }

    /// LayerNorm over each row of `width` floats: (x − mean)/√(var + eps) · gamma + beta.
    static func layerNorm(_ pointer: UnsafeMutablePointer<Float>, rows: Int, width: Int,
                          gamma: [Float], beta: [Float], epsilon: Float) {
        gamma.withUnsafeBufferPointer { gamma in
            beta.withUnsafeBufferPointer { beta in
                let g = gamma.baseAddress!, b = beta.baseAddress!
                withUnsafeTemporaryAllocation(of: Float.self, capacity: width) { squares in
                    let d = squares.baseAddress!
                    for row in 0..<rows {
                        let x = pointer + row * width
                        let mean = sum(x, count: width) / Float(width)
                        for i in 0..<width { d[i] = (x[i] - mean) * (x[i] - mean) }
                        let inverse = 1 / (sum(d, count: width) / Float(width) + epsilon).squareRoot()
                        for i in 0..<width { x[i] = (x[i] - mean) * inverse * g[i] + b[i] }
                    }
                }
            }
        }
    }
}
