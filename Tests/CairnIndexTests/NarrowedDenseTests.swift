import CairnCore
@testable import CairnIndex
import CairnTestSupport
import Foundation
import Testing

/// Dense search over a large index narrows the rows by the signs of their vectors before
/// scoring them from the int8 codes (`RankingConfiguration.approximateDenseAbove`); hybrid
/// queries then take the dense moments from a fixed sample. Forced on here at test size.
@Suite("Dense search narrowed by sign bits")
struct NarrowedDenseTests {
    static let narrowing = RankingConfiguration(approximateDenseAbove: 0, shortlistFraction: 0.1)
    static let flat = RankingConfiguration(approximateDenseAbove: .max)

    static func write(_ entries: [ChunkRecord], version: Int = 1, in directory: String) throws -> String {
        let path = (directory as NSString).appendingPathComponent("index.sqlite")
        let meta = SnapshotMeta(channel: "test", version: version, dimension: entries.first?.vector.count ?? DenseRescoreTests.dimension,
                                modelID: "synthetic", entries: entries)
        try SnapshotWriter.create(at: path, meta: meta, entries: entries)
        return path
    }

    /// Exact search's top `k` ids over `entries` (cosine, then id).
    static func exact(_ entries: [ChunkRecord], _ query: [Float], k: Int = 10) -> [String] {
        entries.map { ($0.chunk.id, dot($0.vector, query)) }.sorted { $0.1 != $1.1 ? $0.1 > $1.1 : $0.0 < $1.0 }.prefix(k).map(\.0)
    }

    static func queries(near entries: [ChunkRecord], count: Int = 20) -> [[Float]] {
        var random = SplitMix64(seed: 11)
        return (0..<count).map { _ in
            unit(entries[Int(random.next() % UInt64(entries.count))].vector.map { $0 + 0.03 * random.normal() })
        }
    }

    /// A shortlist of all 10,000 rows is scored in two halves on two threads (at a million rows
    /// its 30,000 are), as are the 256 rows rescored exactly.
    @Test("Given 10,000 clustered vectors narrowed to a tenth by their signs (or to all, scored on two threads), when searching densely, then the top 10 are exact search's, in order, with exact cosines",
          arguments: [0.1, 1.0])
    func narrowedEqualsExact(shortlist fraction: Double) throws {
        let entries = DenseRescoreTests.entries(count: 10_000)
        try withTemporaryDirectory { directory in
            let path = try Self.write(entries, in: directory)
            let index = try SearchIndex(path: path, configuration: RankingConfiguration(approximateDenseAbove: 0, shortlistFraction: fraction))
            #expect(index.narrowsDense)
            #expect(!(try SearchIndex(path: path)).narrowsDense, "10,000 rows are under the default threshold")
            for query in Self.queries(near: entries) {
                let found = try index.search(SearchRequest(query: "water", k: 10, mode: .dense, minSimilarity: -1), queryVector: query).results
                #expect(found.map(\.chunk.id) == Self.exact(entries, query))
                for result in found {
                    let vector = entries[Int(result.chunk.id.dropFirst())!].vector
                    #expect(abs(result.denseScore! - dot(vector, query)) < 1e-5)
                }
            }
        }
    }

    @Test("Given a row whose cosine with the query is high but whose signs nearly all differ from the query's, when searching densely and hybrid, then the narrowed search misses it and the flat one finds it",
          arguments: [64, 100])
    func narrowingIsReal(dimension d: Int) throws {
        // Query: a large first component and small positive ones; the hidden row: the same first
        // component and small negative ones (cosine ≈ 0.8 at 64 dimensions, 0.7 at 100; random
        // rows stay under 0.45), its signs differ in all but one place. 100 dimensions leave
        // 28 unused bits in the second word.
        let query = unit([6] + [Float](repeating: 0.4, count: d - 1))
        let hidden = ChunkRecord(chunk: Chunk(id: "hidden", title: "", content: "water", scenario: nil, tags: []),
                                 vector: unit([6] + [Float](repeating: -0.1, count: d - 1)))
        var random = SplitMix64(seed: 5)
        let others = (0..<2_000).map { index in
            ChunkRecord(chunk: Chunk(id: String(format: "r%05d", index), title: "", content: "water", scenario: nil, tags: []),
                        vector: unit((0..<d).map { _ in random.normal() }))
        }
        let entries = others + [hidden]
        #expect(Self.exact(entries, query, k: 1) == ["hidden"])
        try withTemporaryDirectory { directory in
            let path = try Self.write(entries, in: directory)
            let narrowing = try SearchIndex(path: path, configuration: Self.narrowing), flat = try SearchIndex(path: path, configuration: Self.flat)
            for mode in [SearchRequest.Mode.dense, .hybrid] {
                // A word no row holds: the hybrid ranking is the dense one, and no lexical
                // candidate brings the hidden row back.
                let request = SearchRequest(query: "kettle", k: 10, mode: mode, minSimilarity: -1)
                let narrowed = try narrowing.search(request, queryVector: query).results
                #expect(try flat.search(request, queryVector: query).results.first?.chunk.id == "hidden", "\(mode)")
                #expect(!narrowed.isEmpty && !narrowed.map(\.chunk.id).contains("hidden"), "\(mode)")
            }
        }
    }

    @Test("Given 20,000 clustered vectors (more than the moment sample), when searching hybrid narrowed and flat, then both rank the same top 10 and their fused scores agree within 0.02")
    func hybridMomentsFromTheSample() throws {
        let entries = DenseRescoreTests.entries(count: 20_000)
        #expect(entries.count > SearchIndex.momentSample)
        try withTemporaryDirectory { directory in
            let path = try Self.write(entries, in: directory)
            let narrowed = try SearchIndex(path: path, configuration: Self.narrowing)
            let flat = try SearchIndex(path: path, configuration: Self.flat)
            for (query, words) in zip(Self.queries(near: entries, count: 10), ["kettle", "water boil", "storm shelter", "rope", "pump filter",
                                                                                "radio", "map route", "torch battery", "tank", "bridge"]) {
                let request = SearchRequest(query: words, k: 10, mode: .hybrid)
                let a = try narrowed.search(request, queryVector: query), b = try flat.search(request, queryVector: query)
                #expect(a.fusion == .weighted && b.fusion == .weighted)
                // The narrowed moments are the sample's, scaled to every row: not the flat scan's.
                let (sampled, full) = (try #require(a.hybridMoments), try #require(b.hybridMoments))
                #expect(sampled.denseCount == full.denseCount && sampled.denseSquares != full.denseSquares)
                #expect(a.results.map(\.chunk.id) == b.results.map(\.chunk.id), "\(words)")
                for (x, y) in zip(a.results, b.results) { #expect(abs(x.fusedScore - y.fusedScore) < 0.02) }
            }
        }
    }

    /// `entries` written as version 1 and scanned, and version 2 derived from it by a delta:
    /// every `changingEvery`-th row given the vector three rows on (another cluster's), every
    /// `deletingEvery`-th of the others deleted, `adding` new rows.
    static func derive(_ entries: [ChunkRecord], changingEvery: Int, deletingEvery: Int, adding: Int, in directory: String)
        throws -> (old: IndexContents, next: String, contents: IndexContents, version2: [ChunkRecord]) {
        let path = try write(entries, in: directory)
        let old = try Snapshot.scan(at: path, check: .storedHashes)
        let upserts = stride(from: 0, to: entries.count, by: changingEvery).map { index in
            ChunkRecord(chunk: entries[index].chunk, vector: entries[(index + 3) % entries.count].vector)
        } + DenseRescoreTests.entries(count: entries.count + adding).suffix(adding)
        let deletes = stride(from: deletingEvery, to: entries.count, by: deletingEvery).filter { $0 % changingEvery != 0 }.map { entries[$0].chunk.id }
        let changed = Set(upserts.map(\.chunk.id)).union(deletes)
        let version2 = entries.filter { !changed.contains($0.chunk.id) } + upserts
        let meta = SnapshotMeta(channel: "test", version: 2, dimension: DenseRescoreTests.dimension, modelID: "synthetic", entries: version2)
        let (next, derived) = try DerivedContentsTests.apply(upserts, deleting: deletes, to: old, at: path, meta: meta, name: "2", in: directory)
        return (old, next, try #require(derived), version2)
    }

    @Test("Given an index larger than the moment sample and a delta that changes, deletes and adds rows, when the derived version takes its sample, then it is the base's sampled rows still live, in the block the base file keeps, and the overlay's rows at the base's rate")
    func derivedVersionReusesTheBaseSample() throws {
        let entries = DenseRescoreTests.entries(count: 20_000)
        try withTemporaryDirectory { directory in
            // Every 50th row changed, every 30th deleted (some of them sampled rows), 500 new rows.
            let (old, next, contents, version2) = try Self.derive(entries, changingEvery: 50, deletingEvery: 30, adding: 500, in: directory)
            let before = SearchIndex.MomentSample(old)
            #expect(before.rows == (0..<SearchIndex.momentSample).map { $0 * 20_000 / SearchIndex.momentSample } && before.mask == nil)
            #expect(contents.base === old.base && contents.overlayCount == 900)

            let after = SearchIndex.MomentSample(contents)
            let baseRows = after.rows.filter { $0 < contents.base.count }
            #expect(baseRows == before.rows.filter(contents.isLive) && baseRows.count < before.rows.count)
            #expect(after.overlayRows.count == 900 * SearchIndex.momentSample / 20_000 && after.overlayRows.allSatisfy(contents.isLive))
            #expect(after.rows == baseRows + after.overlayRows)
            // The base's block was copied once, when the first version opened (it is still held,
            // so another block could not take its address).
            let held = before.base.codes.withUnsafeBufferPointer(\.baseAddress)
            #expect(after.base.codes.withUnsafeBufferPointer(\.baseAddress) == held)
            // Each row's codes and scale, as its file holds them.
            let d = DenseRescoreTests.dimension
            for (position, row) in after.base.rows.enumerated() {
                #expect(after.base.codes[position * d ..< (position + 1) * d].elementsEqual(contents.base.codes[Int(row) * d ..< (Int(row) + 1) * d]))
                #expect(after.base.scales[position] == contents.base.scales[Int(row)])
            }
            for (position, row) in after.overlayRows.enumerated() {
                let local = row - contents.base.count
                #expect(after.overlayCodes[position * d ..< (position + 1) * d].elementsEqual(contents.overlay!.codes[local * d ..< (local + 1) * d]))
                #expect(after.overlayScales[position] == contents.overlay!.scales[local])
            }
            // Hybrid answers from the sample (the removed rows masked out) agree with the flat
            // scan's moments over every row.
            let narrowed = try SearchIndex(path: next, configuration: Self.narrowing, contents: contents)
            let flat = try SearchIndex(path: next, configuration: Self.flat, contents: contents)
            for (query, words) in zip(Self.queries(near: version2, count: 5), ["kettle", "water boil", "storm shelter", "rope", "radio"]) {
                let request = SearchRequest(query: words, k: 10, mode: .hybrid)
                let a = try narrowed.search(request, queryVector: query), b = try flat.search(request, queryVector: query)
                let (sampled, full) = (try #require(a.hybridMoments), try #require(b.hybridMoments))
                #expect(sampled.denseCount == full.denseCount && sampled.denseCount == version2.count)
                #expect(a.results.map(\.chunk.id) == b.results.map(\.chunk.id), "\(words)")
                for (x, y) in zip(a.results, b.results) { #expect(abs(x.fusedScore - y.fusedScore) < 0.02) }
            }
        }
    }

    @Test("Given a narrowed index and a delta that changes, deletes and adds rows, when the derived contents serve, narrowed or flat (whose shortlist leaves the removed rows out), then dense answers equal exact search over the new rows")
    func deltaKeepsNarrowedExact() throws {
        let entries = DenseRescoreTests.entries(count: 6_000)
        try withTemporaryDirectory { directory in
            // Every tenth row moved to another cluster's vector, every seventh deleted, 300 new rows.
            let (_, next, contents, version2) = try Self.derive(entries, changingEvery: 10, deletingEvery: 7, adding: 300, in: directory)
            // 600 rows replaced and 300 added; 772 deleted (every seventh but the tenths) and the 600 replaced removed.
            #expect(contents.overlayCount == 900 && contents.removedCount == 772 + 600)
            let index = try SearchIndex(path: next, configuration: Self.narrowing, contents: contents)
            let flat = try SearchIndex(path: next, configuration: Self.flat, contents: contents)
            #expect(index.narrowsDense && index.count == version2.count && !flat.narrowsDense)
            for query in Self.queries(near: version2) {
                for searched in [index, flat] {
                    let found = try searched.search(SearchRequest(query: "water", k: 10, mode: .dense, minSimilarity: -1), queryVector: query).results
                    #expect(found.map(\.chunk.id) == Self.exact(version2, query), "narrowed: \(searched.narrowsDense)")
                }
            }
        }
    }
}

extension SearchIndex.MomentSample {
    /// Every sampled row the version holds, ascending.
    var rows: [Int] {
        base.rows.indices.filter { mask?[$0] ?? true }.map { Int(base.rows[$0]) } + overlayRows
    }
}
