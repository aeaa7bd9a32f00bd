import CairnTestSupport
import CairnThreads
import Foundation
import Synchronization
import Testing
@testable import CairnEmbedding

/// The encoder's C kernels, each instruction set this CPU runs, against Double references. Odd
/// sizes make every kernel take its tail path (widths that are not a multiple of 16 or 32).
@Suite("Encoder kernels per instruction set")
struct KernelTests {
    static var sets: [EncoderKernels] { EncoderKernels.available }

    @Test("Given this CPU, when kernel sets are listed, then the baseline is always there and best is the widest")
    func setsAreChosenByCPU() throws {
        let names = Self.sets.map(\.description)
        #expect(names.first == "baseline")
        #expect(EncoderKernels.best.description == names.last)
        let flags = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?.split(separator: "\n")
            .first { $0.hasPrefix("flags") }.map { Set($0.split(separator: " ").map(String.init)) } ?? []
        #expect(names.contains("avx2") == flags.isSuperset(of: ["avx2", "fma"]))
        #expect(names.contains("avx512") == flags.isSuperset(of: ["avx512f", "avx512dq", "avx512bw", "avx512vl", "fma"]))
    }

    @Test("Given each kernel set, when GELU runs on -20…20, then it is x·Φ(x) within 1e-6")
    func geluMatchesErf() {
        let inputs = (0..<4001).map { Float($0 - 2000) / 100 }
        for kernels in Self.sets {
            var values = inputs
            values.withUnsafeMutableBufferPointer { kernels.gelu($0) }
            var worst = 0.0
            for (x, y) in zip(inputs, values) {
                let exact: Double = Double(x) * 0.5 * (1 + Foundation.erf(Double(x) / 2.0.squareRoot()))
                worst = max(worst, abs(Double(y) - exact))
            }
            #expect(worst < 1e-6, "\(kernels): worst |Δ| \(worst)")
        }
    }

    @Test("Given each kernel set, when softmax runs on rows with a stride, then rows sum to 1, match e^x/Σe^x, and the gap is untouched")
    func softmaxMatchesReference() {
        var generator = SplitMix(seed: 5)
        for kernels in Self.sets {
            for columns in [1, 7, 16, 19, 45] {
                let stride = columns + 3, rows = 4
                let input = (0..<(rows * stride)).map { _ in generator.nextFloat() * 40 - 20 }
                var values = input
                values.withUnsafeMutableBufferPointer { kernels.softmaxRows($0.baseAddress!, rows: rows, columns: columns, stride: stride) }
                for row in 0..<rows {
                    let x: [Double] = input[(row * stride)..<(row * stride + columns)].map(Double.init)
                    let top = x.max()!
                    let total: Double = x.reduce(0) { $0 + Foundation.exp($1 - top) }
                    var worst = 0.0
                    for (column, value) in x.enumerated() {
                        let exact: Double = Foundation.exp(value - top) / total
                        worst = max(worst, abs(exact - Double(values[row * stride + column])))
                    }
                    #expect(worst < 1e-6, "\(kernels), \(columns) columns: worst |Δ| \(worst)")
                    #expect(values[(row * stride + columns)..<(row * stride + stride)] == input[(row * stride + columns)..<(row * stride + stride)])
                }
            }
        }
    }

    @Test("Given each kernel set, when LayerNorm runs, then each row is (x − mean)/σ · γ + β")
    func layerNormMatchesReference() {
        var generator = SplitMix(seed: 9)
        for kernels in Self.sets {
            for width in [5, 16, 37, 384] {
                let rows = 3
                let input = (0..<(rows * width)).map { _ in generator.nextFloat() * 8 - 3 }
                let gamma = (0..<width).map { _ in generator.nextFloat() + 0.5 }
                let beta = (0..<width).map { _ in generator.nextFloat() - 0.5 }
                var values = input
                values.withUnsafeMutableBufferPointer { kernels.layerNorm($0.baseAddress!, rows: rows, gamma: TensorFloats(copying: gamma), beta: TensorFloats(copying: beta), epsilon: 1e-12) }
                for row in 0..<rows {
                    let x: [Double] = input[(row * width)..<((row + 1) * width)].map(Double.init)
                    let mean: Double = x.reduce(0, +) / Double(width)
                    let variance: Double = x.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(width)
                    let sigma = (variance + 1e-12).squareRoot()
                    var worst = 0.0
                    for column in 0..<width {
                        let exact: Double = (x[column] - mean) / sigma * Double(gamma[column]) + Double(beta[column])
                        worst = max(worst, abs(exact - Double(values[row * width + column])))
                    }
                    #expect(worst < 1e-5, "\(kernels), width \(width): worst |Δ| \(worst)")
                }
            }
        }
    }

    @Test("Given each kernel set, when the packed linear kernel runs panel range by panel range, then y = x·Wᵀ + b (+ y)",
          arguments: [(outputs: 32, inputs: 16, tokens: 1), (outputs: 100, inputs: 37, tokens: 13), (outputs: 96, inputs: 384, tokens: 17)])
    func packedLinearMatchesReference(shape: (outputs: Int, inputs: Int, tokens: Int)) {
        var generator = SplitMix(seed: UInt64(shape.outputs * 1000 + shape.inputs))
        let (outputs, inputs, tokens) = shape
        let weight = (0..<(outputs * inputs)).map { _ in generator.nextFloat() - 0.5 }
        let bias = (0..<outputs).map { _ in generator.nextFloat() }
        let x = (0..<(tokens * inputs)).map { _ in generator.nextFloat() - 0.5 }
        let start = (0..<(tokens * outputs)).map { _ in generator.nextFloat() }
        let layer = EncoderKernels.PackedLinear(weight: TensorFloats(copying: weight), bias: TensorFloats(copying: bias), outputs: outputs, inputs: inputs)
        for kernels in Self.sets {
            for accumulate in [false, true] {
                var y = start
                // Two calls over disjoint panel ranges, as two threads would make them.
                let split = layer.panels / 2
                y.withUnsafeMutableBufferPointer { out in
                    for range in [0..<split, split..<layer.panels] {
                        kernels.linear(x, tokens: tokens, layer: layer, panels: range, into: out.baseAddress!, accumulate: accumulate)
                    }
                }
                var worst = 0.0
                for t in 0..<tokens {
                    for o in 0..<outputs {
                        var sum = Double(bias[o]) + (accumulate ? Double(start[t * outputs + o]) : 0)
                        for i in 0..<inputs { sum += Double(x[t * inputs + i]) * Double(weight[o * inputs + i]) }
                        worst = max(worst, abs(sum - Double(y[t * outputs + o])))
                    }
                }
                #expect(worst < 1e-4, "\(kernels), accumulate \(accumulate): worst |Δ| \(worst)")
            }
        }
    }

    @Test("Given two callers sharing the worker team, when each runs many chunked jobs, then every chunk runs exactly once per call, before the call returns")
    func workerTeamRunsEveryChunkOnce() async throws {
        let team = WorkerTeam(helpers: 1)
        let calls = 2_000, chunks = 5
        let counts = (0..<2).map { _ in Counts(parts: chunks) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for caller in 0..<2 {
                group.addTask {
                    try await onThread {
                        for _ in 0..<calls {
                            let before = counts[caller].total()
                            team.run(chunks: chunks) { chunk in counts[caller].add(chunk) }
                            if counts[caller].total() != before + chunks { counts[caller].returnedEarly() }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        for count in counts {
            #expect(count.values() == [Int](repeating: calls, count: chunks))
            #expect(count.earlyReturns() == 0)
        }
    }

    final class Counts: Sendable {
        private let storage: Mutex<[Int]>
        private let early = Mutex(0)
        init(parts: Int) { storage = Mutex([Int](repeating: 0, count: parts)) }
        func returnedEarly() { early.withLock { $0 += 1 } }
        func earlyReturns() -> Int { early.withLock { $0 } }
        func add(_ part: Int) { storage.withLock { $0[part] += 1 } }
        func total() -> Int { storage.withLock { $0.reduce(0, +) } }
        func values() -> [Int] { storage.withLock { $0 } }
    }
}

/// A small deterministic generator for test data.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    mutating func nextFloat() -> Float { Float(next() >> 40) / Float(1 << 24) }
}
