import CairnCore
import CairnTestSupport
import CEncoderKernels
import Testing

/// The sign bits' kernels (the narrowed dense search's first pass) at every instruction-set
/// level this CPU runs, against a plain Swift count: a kernel chosen only on some machines must
/// not give another shortlist there.
@Suite struct SignKernelTests {
    static let levels: [(level: Int32, name: String)] = [(0, "baseline"), (1, "POPCNT"), (2, "AVX-512")]

    @Test("Given rows of 1 to 13 words, when each level's Hamming kernel compares them with a query, then every distance is the count of differing bits, also from an offset", arguments: [1, 2, 6, 7, 8, 9, 13])
    func hammingCountsDifferingBits(words: Int) {
        var bits = SplitMix64(seed: UInt64(words))
        let n = 1_003
        let rows = (0..<(n * words)).map { _ in bits.next() }
        // Near rows too: the query is row 17 with a few bits changed.
        var query = Array(rows[17 * words..<18 * words])
        query[0] ^= 0b1011
        let expected = (0..<n).map { r in (0..<words).reduce(0) { $0 + (rows[r * words + $1] ^ query[$1]).nonzeroBitCount } }
        var ran = 0
        for (level, name) in Self.levels {
            var distances = [UInt16](repeating: 0xFFFF, count: n)
            // Two calls over two ranges, as the worker team splits a pass.
            let first = cairn_hamming_level(level, rows, 0, 500, Int32(words), query, &distances)
            let second = cairn_hamming_level(level, rows, 500, n - 500, Int32(words), query, &distances)
            guard first == 1, second == 1 else { continue }
            ran += 1
            #expect(distances.map(Int.init) == expected, "\(name) kernel, \(words) words")
        }
        #expect(ran >= 1)
        #expect(expected[17] == 3)
    }

    @Test("Given distances with many ties, when each level selects the nearest rows, then it keeps the smallest distances, ties in row order, and stops at the maximum", arguments: [1, 31, 32, 100, 1_000, 5_000])
    func selectKeepsTheNearestInRowOrder(keep: Int) {
        var bits = SplitMix64(seed: UInt64(keep))
        let n = 4_111  // not a multiple of 4 or 32: the kernels' tails run too
        let distances = (0..<n).map { _ in UInt16(bits.next() % 60) + 100 }
        let maximum = 150
        // Reference: sort by (distance, row), drop those beyond the maximum, keep `keep`, in row order.
        let expected = (0..<n).filter { Int(distances[$0]) <= maximum }
            .sorted { (distances[$0], $0) < (distances[$1], $1) }
            .prefix(keep).sorted().map(Int32.init)
        var ran = 0
        for (level, name) in Self.levels {
            var rows = [Int32](repeating: -1, count: keep)
            var kept = 0
            guard cairn_select_nearest_level(level, distances, n, keep, Int32(maximum), &rows, &kept) == 1 else { continue }
            ran += 1
            #expect(Array(rows.prefix(kept)) == expected, "\(name) kernel, keep \(keep)")
        }
        #expect(ran >= 1)
        var rows = [Int32](repeating: -1, count: keep)
        #expect(cairn_select_nearest(distances, n, keep, Int32(maximum), &rows) == expected.count)
        #expect(Array(rows.prefix(expected.count)) == expected)
    }
}
