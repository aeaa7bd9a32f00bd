/// Element-wise kernels of the encoder, written on SIMD16 so that they vectorise: the matrix
/// products go to OpenBLAS, and these are what is left (GELU, softmax, LayerNorm).
enum VectorMath {
    typealias Vector = SIMD16<Float>

    /// e^x, accurate to about 2 ulp for x in [-87, 88]: x = n·ln2 + r, a degree-6 polynomial for
    /// e^r on |r| ≤ ln2/2, and 2^n built in the exponent bits.
    @inline(__always)
    static func exp(_ input: Vector) -> Vector {
        let x = input.clamped(lowerBound: Vector(repeating: -87.3), upperBound: Vector(repeating: 88.3))
        let n = (x * 1.442_695_04).rounded(.toNearestOrEven)
        // Cody–Waite: ln2 split in two so that x - n·ln2 keeps its low bits.
        let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6
        var p = Vector(repeating: 1.0 / 720)
        p = p * r + 1.0 / 120
        p = p * r + 1.0 / 24
        p = p * r + 1.0 / 6
        p = p * r + 0.5
        p = p * r + 1
        p = p * r + 1
        let exponent = (SIMD16<Int32>(n) &+ 127) &<< 23
        return p * unsafeBitCast(exponent, to: Vector.self)
    }

    /// erf(x) with absolute error below 2e-7 (Abramowitz & Stegun 7.1.26 is 1.5e-7; this uses
    /// the same form with t = 1/(1 + p|x|) and e^(−x²) from `exp`).
    @inline(__always)
    static func erf(_ x: Vector) -> Vector {
        let a = abs(x)
        let t = 1 / (1 + 0.327_591_1 * a)
        var poly = Vector(repeating: 1.061_405_429)
        poly = poly * t - 1.453_152_027
        poly = poly * t + 1.421_413_741
        poly = poly * t - 0.284_496_736
        poly = poly * t + 0.254_829_592
        poly = poly * t
        let y = 1 - poly * exp(-a * a)
        return y.replacing(with: -y, where: x .< 0)
    }

    @inline(__always)
    static func abs(_ x: Vector) -> Vector {
        unsafeBitCast(unsafeBitCast(x, to: SIMD16<UInt32>.self) & 0x7FFF_FFFF, to: Vector.self)
    }

    /// x ← x · ½(1 + erf(x/√2)), the exact GELU of BERT.
    static func gelu(_ buffer: UnsafeMutableBufferPointer<Float>) {
        let count = buffer.count
        let base = UnsafeMutableRawPointer(buffer.baseAddress!)
        var index = 0
        while index + 16 <= count {
            let pointer = base + index * 4
            let x = pointer.loadUnaligned(as: Vector.self)
            pointer.storeBytes(of: x * 0.5 * (1 + erf(x * 0.707_106_77)), as: Vector.self)
            index += 16
        }
        if index < count {
            var x = Vector(repeating: 0)
            for lane in 0..<(count - index) { x[lane] = buffer[index + lane] }
            let y = x * 0.5 * (1 + erf(x * 0.707_106_77))
            for lane in 0..<(count - index) { buffer[index + lane] = y[lane] }
        }
    }

    /// Softmax of each of `rows` rows of length `columns` (row stride `stride`), in place.
    static func softmaxRows(_ pointer: UnsafeMutablePointer<Float>, rows: Int, columns: Int, stride: Int) {
        for row in 0..<rows {
            let values = UnsafeMutableBufferPointer(start: pointer + row * stride, count: columns)
            var maximum = -Float.infinity
            for value in values { maximum = max(maximum, value) }
            var sum: Float = 0
            var column = 0
            let raw = UnsafeMutableRawPointer(values.baseAddress!)
            while column + 16 <= columns {
                let e = exp(raw.loadUnaligned(fromByteOffset: column * 4, as: Vector.self) - maximum)
                raw.storeBytes(of: e, toByteOffset: column * 4, as: Vector.self)
                sum += e.sum()
                column += 16
            }
            if column < columns {
                var x = Vector(repeating: -Float.infinity)
                for lane in 0..<(columns - column) { x[lane] = values[column + lane] - maximum }
                let e = exp(x)
                for lane in 0..<(columns - column) {
                    values[column + lane] = e[lane]
                    sum += e[lane]
                }
            }
            let scale = 1 / sum
            for index in 0..<columns { values[index] *= scale }
        }
    }

    /// LayerNorm over each row of `width` floats: (x − mean)/√(var + eps) · gamma + beta.
    static func layerNorm(_ pointer: UnsafeMutablePointer<Float>, rows: Int, width: Int,
                          gamma: [Float], beta: [Float], epsilon: Float) {
        gamma.withUnsafeBufferPointer { gamma in
            beta.withUnsafeBufferPointer { beta in
                for row in 0..<rows {
                    let x = pointer + row * width
                    var sum: Float = 0
                    for i in 0..<width { sum += x[i] }
                    let mean = sum / Float(width)
                    var squares: Float = 0
                    for i in 0..<width {
                        let d = x[i] - mean
                        squares += d * d
                    }
                    let inverse = 1 / (squares / Float(width) + epsilon).squareRoot()
                    for i in 0..<width { x[i] = (x[i] - mean) * inverse * gamma[i] + beta[i] }
                }
            }
        }
    }
}
