import CairnCore
import CairnTestSupport
import CEncoderKernels
import Foundation
import Testing

/// The int8 codes' scoring kernels (every dense query's estimates) at every instruction-set
/// level this CPU runs: the same estimates, bit for bit, on every level, and each within the
/// query's rounding to int16 of the float product of codes and query.
@Suite struct ScoringKernelTests {
    static let levels: [(level: Int32, name: String)] = [(0, "baseline"), (1, "AVX2"), (2, "AVX-512")]

    /// `n` rows of `d` codes in [-127, 127] (the extremes included), scales, and a unit query.
    static func rows(_ n: Int, _ d: Int, seed: UInt64) -> (codes: [Int8], scales: [Float], query: [Float]) {
        var bits = SplitMix64(seed: seed)
        var codes = (0..<(n * d)).map { _ in Int8(Int(bits.next() % 255) - 127) }
        for j in 0..<d { codes[j] = 127; codes[d + j] = -127 }  // rows 0 and 1 at the extremes
        let scales = (0..<n).map { _ in Float(bits.next() % 1_000 + 1) / 100_000 }
        var query = (0..<d).map { _ in Float(Int(bits.next() % 2_001) - 1_000) / 1_000 }
        let norm = query.reduce(0) { $0 + $1 * $1 }.squareRoot()
        query = query.map { $0 / norm }
        return (codes, scales, query)
    }

    @Test("Given rows of 1 to 769 codes, when each level scores a range and a list of them, then every level gives the same estimates, each within 1e-4 of the float product", arguments: [1, 15, 16, 17, 31, 32, 33, 48, 384, 385, 769])
    func everyLevelAgrees(d: Int) throws {
        let n = 203
        let (codes, scales, query) = Self.rows(n, d, seed: UInt64(d))
        let exact = (0..<n).map { r in
            Double(scales[r]) * (0..<d).reduce(0.0) { $0 + Double(codes[r * d + $1]) * Double(query[$1]) }
        }
        // Relative to the largest a row could score: the query's rounding is 1/32767 of its largest value a lane.
        let bound = (0..<n).map { r in 1e-4 * Double(scales[r]) * 127 * (0..<d).reduce(0.0) { $0 + abs(Double(query[$1])) } }
        let listed: [Int32] = (0..<n).map { Int32((n - 1 - $0) * 7 % n) }
        var results: [(name: String, range: [Float], list: [Float])] = []
        for (level, name) in Self.levels {
            var range = [Float](repeating: .nan, count: n)
            var list = [Float](repeating: .nan, count: n)
            // Two calls over two ranges, as the worker team splits a pass.
            guard cairn_similarities_i8_level(level, codes, scales, nil, 0, 100, Int32(d), query, &range) == 1 else { continue }
            #expect(cairn_similarities_i8_level(level, codes, scales, nil, 100, n - 100, Int32(d), query, &range) == 1)
            #expect(cairn_similarities_i8_level(level, codes, scales, listed, 0, n, Int32(d), query, &list) == 1)
            for r in 0..<n {
                #expect(abs(Double(range[r]) - exact[r]) <= bound[r], "\(name) kernel, \(d) codes, row \(r)")
            }
            #expect((0..<n).allSatisfy { list[$0] == range[Int(listed[$0])] }, "\(name) kernel's list, \(d) codes")
            results.append((name, range, list))
        }
        let baseline = try #require(results.first)
        #expect(baseline.name == "baseline")
        for other in results.dropFirst() {
            #expect(other.range == baseline.range, "\(other.name) against the baseline, \(d) codes")
        }
    }

    @Test("Given the largest codes and dimension 4,096, when a query of equal values scores them, then no sum overflows: the estimate is the float product's")
    func wideRowsDoNotOverflow() {
        let d = 4_096
        let codes = [Int8](repeating: 127, count: d)
        let scales: [Float] = [1]
        let query = [Float](repeating: 1 / Float(d).squareRoot(), count: d)
        var y: [Float] = [0]
        cairn_similarities_i8(codes, scales, 0, 1, Int32(d), query, &y)
        let exact = 127 * Float(d).squareRoot()
        #expect(abs(y[0] - exact) <= exact * 1e-4, "\(y[0]) against \(exact)")
    }

    @Test("Given a query with a NaN, or all zeros, when rows are scored, then every estimate is NaN, or zero")
    func queriesWithoutScale() {
        let (codes, scales, query) = Self.rows(5, 16, seed: 1)
        var y = [Float](repeating: 1, count: 5)
        var broken = query
        broken[3] = .nan
        cairn_similarities_i8(codes, scales, 0, 5, 16, broken, &y)
        #expect(y.allSatisfy { $0.isNaN })
        cairn_similarities_i8(codes, scales, 0, 5, 16, [Float](repeating: 0, count: 16), &y)
        #expect(y == [Float](repeating: 0, count: 5))
    }

    @Test("Given scores with many ties, when the k-th highest is asked for, then it is the sorted scores' k-th, and -∞ for k out of range or a NaN", arguments: [1, 2, 255, 256, 257, 1_000, 4_110, 4_111])
    func kthHighest(k: Int) {
        var bits = SplitMix64(seed: UInt64(k))
        let n = 4_111
        // Forty distinct values: about a hundred rows tie on each.
        let scores = (0..<n).map { _ in Float(bits.next() % 40) / 7 - 2 }
        let sorted = scores.sorted(by: >)
        #expect(cairn_kth_highest(scores, n, k) == sorted[k - 1])
        #expect(cairn_kth_highest(scores, n, 0) == -.infinity)
        #expect(cairn_kth_highest(scores, n, n + 1) == -.infinity)
        var broken = scores
        broken[k - 1] = .nan
        #expect(cairn_kth_highest(broken, n, k) == -.infinity)
        let same = [Float](repeating: 0.5, count: n)
        #expect(cairn_kth_highest(same, n, k) == 0.5)
    }
}
