import CairnCore
import CairnIndex
import CairnTestSupport
import Foundation
import Testing

/// Dense search keeps int8 codes in memory and rescores its best rows from the file's float32
/// vectors: on an index larger than the rescored shortlist, with clustered vectors whose
/// neighbours' cosines differ by less than the codes' error, the answers must be exact search's.
@Suite("Dense search: int8 codes, exact rescoring")
struct DenseRescoreTests {
    static let dimension = 64
    static let words = ["water", "boil", "flood", "map", "radio", "storm", "shelter", "torch", "battery", "bandage",
                        "route", "bridge", "pump", "filter", "tank", "rope"]

    /// `count` chunks around 20 cluster centres (noise 0.05 per component, then unit length), each
    /// with six random words (and "kettle" in every hundredth); deterministic.
    static func entries(count: Int) -> [ChunkRecord] {
        var random = SplitMix64(seed: 42)
        let centres = (0..<20).map { _ in unit((0..<dimension).map { _ in random.normal() }) }
        return (0..<count).map { index in
            let centre = centres[index % centres.count]
            let vector = unit(centre.map { $0 + 0.05 * random.normal() })
            var content = (0..<6).map { _ in words[Int(random.next() % UInt64(words.count))] }.joined(separator: " ")
            // A rare word in 30 rows of cluster 17.
            if index % 100 == 57 { content += " kettle" }
            return ChunkRecord(chunk: Chunk(id: String(format: "c%05d", index), title: "", content: content, scenario: nil,
                                            tags: [], source: nil), vector: vector)
        }
    }

    /// The entries written as a snapshot in `directory`, opened.
    static func index(_ entries: [ChunkRecord], in directory: String) throws -> SearchIndex {
        let path = (directory as NSString).appendingPathComponent("index.sqlite")
        let meta = SnapshotMeta(channel: "test", version: 1, dimension: dimension, modelID: "synthetic", entries: entries)
        try SnapshotWriter.create(at: path, meta: meta, entries: entries)
        return try SearchIndex(path: path)
    }

    @Test("Given 3,000 clustered vectors and 20 queries near the clusters, when searching densely, then the top 10 are exact search's, in its order, with its cosines")
    func denseEqualsExact() throws {
        let entries = Self.entries(count: 3_000)
        try withTemporaryDirectory { directory in
            let index = try Self.index(entries, in: directory)
            var random = SplitMix64(seed: 7)
            for _ in 0..<20 {
                let query = unit(entries[Int(random.next() % 3_000)].vector.map { $0 + 0.03 * random.normal() })
                let exact = entries.map { ($0.chunk.id, dot($0.vector, query)) }
                    .sorted { $0.1 != $1.1 ? $0.1 > $1.1 : $0.0 < $1.0 }.prefix(10)
                let found = try index.search(SearchRequest(query: "water", k: 10, mode: .dense, minSimilarity: -1), queryVector: query).results
                #expect(found.map(\.chunk.id) == exact.map(\.0))
                for (result, expected) in zip(found, exact) { #expect(abs(result.denseScore! - expected.1) < 1e-5) }
            }
        }
    }

    @Test("Given 3,000 clustered vectors, when searching hybrid with a query whose words match rows far from its vector, then every result's cosine is the exact one")
    func hybridCosinesAreExact() throws {
        let entries = Self.entries(count: 3_000)
        try withTemporaryDirectory { directory in
            let index = try Self.index(entries, in: directory)
            let cosine = { (query: [Float]) in Dictionary(uniqueKeysWithValues: entries.map { ($0.chunk.id, dot($0.vector, query)) }) }
            // Between clusters 0 and 1: their rows lead the dense list; the lexical one holds only
            // the rows of cluster 17 that say "kettle".
            let query = unit(zip(entries[0].vector, entries[1].vector).map { $0 + $1 })
            let exact = cosine(query)
            let answer = try index.search(SearchRequest(query: "kettle", k: 100, mode: .hybrid), queryVector: query)
            #expect(answer.fusion == .weighted)
            // Lexical candidates from other clusters are in the answer: their cosines too are exact.
            let far = answer.results.filter { exact[$0.chunk.id]! < 0.5 }
            #expect(far.count >= 20, "\(far.count) of the 30 kettle rows")
            for result in answer.results { #expect(abs(result.denseScore! - exact[result.chunk.id]!) < 1e-5, "\(result.chunk.id)") }
        }
    }

    @Test("Given an index whose file is damaged after its rows files were written (its vectors four bytes short), when it is opened from them and searched densely or hybrid, then each search fails with dimension_mismatch")
    func damagedVectorIsRefused() throws {
        let entries = Self.entries(count: 300)
        try withTemporaryDirectory { directory in
            let path = (directory as NSString).appendingPathComponent("index.sqlite")
            let query = entries[0].vector
            // Opening it the first time writes its rows files beside it.
            #expect(try Self.index(entries, in: directory).search(SearchRequest(query: "water", k: 10, mode: .dense),
                                                                 queryVector: query).results.count == 10)
            try Database(path: path, mode: .readWrite).exec("UPDATE chunks SET embedding = substr(embedding, 1, \(Self.dimension * 4 - 4))")
            // Opened again from its rows files, no row is read until a search rescores some.
            let index = try SearchIndex(path: path)
            for mode in [SearchRequest.Mode.dense, .hybrid] {
                #expect { try index.search(SearchRequest(query: "water", k: 10, mode: mode), queryVector: query) } throws: {
                    ($0 as? IndexError)?.code == .dimensionMismatch
                }
            }
        }
    }
}

extension SplitMix64 {
    /// A standard normal value (Box–Muller).
    mutating func normal() -> Float {
        let u = (Double(next() >> 11) + 0.5) / 9_007_199_254_740_992, v = Double(next() >> 11) / 9_007_199_254_740_992
        return Float((-2 * log(u)).squareRoot() * cos(2 * Double.pi * v))
    }
}
