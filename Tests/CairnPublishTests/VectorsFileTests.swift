import CairnCore
import CairnEmbedding
import CairnStore
import CairnTestSupport
import Foundation
import Testing
@testable import CairnPublish

/// `publish --vectors FILE.npy`: vectors computed elsewhere are taken only when a sample of them
/// matches what the shipped model gives (the tiny test model here; another seed is "another model").
@Suite("Publish: vectors from a .npy file")
struct VectorsFileTests {
    /// Writes `rows` as a version-1 `.npy` file of little-endian float32 (or float16).
    static func writeNPY(_ rows: [[Float]], to path: String, half: Bool = false) throws {
        var bytes = npyHeader(descr: half ? "<f2" : "<f4", shape: "(\(rows.count), \(rows.first?.count ?? 0))")
        for row in rows {
            for value in row {
                if half {
                    withUnsafeBytes(of: Float16(value).bitPattern.littleEndian) { bytes += $0 }
                } else {
                    withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes += $0 }
                }
            }
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// A version-1 `.npy` header (magic, version, length, the dictionary padded as numpy pads it).
    static func npyHeader(descr: String, shape: String) -> [UInt8] {
        var header = "{'descr': '\(descr)', 'fortran_order': False, 'shape': \(shape), }"
        // numpy pads the header with spaces so that the data starts at a multiple of 64.
        while (10 + header.utf8.count + 1) % 64 != 0 { header += " " }
        header += "\n"
        var bytes: [UInt8] = [0x93] + Array("NUMPY".utf8) + [1, 0]
        bytes += [UInt8(header.utf8.count & 0xff), UInt8(header.utf8.count >> 8)]
        return bytes + Array(header.utf8)
    }

    /// The source's chunks in reading order and `embedder`'s vector for each.
    static func vectors(_ source: String, _ embedder: SentenceEmbedder) throws -> (chunks: [Chunk], rows: [[Float]]) {
        let chunks = try SourceReader.read(path: source, chunking: ChunkingOptions())
        return (chunks, embedder.embed(chunks.map(\.embeddingText)))
    }

    func publish(_ workspace: Workspace, _ source: String, vectors: String, sample: Int = 64) throws(PublishError) -> PublishReport {
        var configuration = PublishConfiguration(repository: workspace.repo, channel: "stable", source: source)
        configuration.vectors = vectors
        configuration.verifySample = sample
        let publisher = Publisher(configuration: configuration, key: workspace.key, embedder: workspace.embedder,
                                  model: workspace.model, cache: try EmbeddingCache(path: workspace.cachePath),
                                  logger: .init(label: "test"))
        return try publisher.publish()
    }

    @Test("Given the model's own vectors in reading order, as float32 and as float16 scaled by 3, when published with --vectors, then every snapshot vector is the file's row at unit length, nothing is embedded, and the cache is filled", arguments: [false, true])
    func accepted(half: Bool) throws {
        let workspace = try Workspace()
        let source = try workspace.writeSource(SampleKB.chunks(count: 40))
        let (chunks, rows) = try Self.vectors(source, workspace.embedder)
        let file = workspace.folder + "/vectors.npy"
        // Scaled rows: the check is by cosine, and the published vectors are unit length again.
        try Self.writeNPY(rows.map { $0.map { $0 * 3 } }, to: file, half: half)

        let report = try publish(workspace, source, vectors: file)
        #expect(report.fromVectorsFile == 40 && report.embedded == 0 && report.reusedFromCache == 0)
        #expect(report.summary.contains("40 from the vectors file"))
        let records = try workspace.records(report.version)
        let byID = Dictionary(uniqueKeysWithValues: records.map { ($0.chunk.id, $0.vector) })
        let cache = try EmbeddingCache(path: workspace.cachePath)
        for (chunk, row) in zip(chunks, rows) {
            let published = try #require(byID[chunk.id])
            let norm = published.reduce(Float(0)) { $0 + $1 * $1 }.squareRoot()
            #expect(abs(norm - 1) < 1e-3)
            #expect(SentenceEmbedder.cosine(published, row) > (half ? 0.9999 : 0.999999), "chunk \(chunk.id)")
            let cached = try cache.vector(modelKey: workspace.model.cacheKey, textHash: VectorSource.textHash(chunk),
                                          dimension: workspace.model.dimension)
            #expect(cached == published)
        }
        #expect(workspace.verify().problems.isEmpty)
    }

    @Test("Given a vectors file that passes its sample check, when the publish is refused after its rows were staged (a canary fails), then the embedding cache holds none of them (a publish without --vectors would ship them); once a publish of the file succeeds, it holds them all")
    func refusedPublishLeavesTheCacheAlone() throws {
        let workspace = try Workspace()
        let source = try workspace.writeSource(SampleKB.chunks(count: 40))
        let (chunks, rows) = try Self.vectors(source, workspace.embedder)
        let file = workspace.folder + "/vectors.npy"
        try Self.writeNPY(rows, to: file)
        var configuration = PublishConfiguration(repository: workspace.repo, channel: "stable", source: source,
                                                 canaries: [Canary(query: "water", expect: ["no-such-chunk"], k: 3)])
        configuration.vectors = file
        let publisher = Publisher(configuration: configuration, key: workspace.key, embedder: workspace.embedder,
                                  model: workspace.model, cache: try EmbeddingCache(path: workspace.cachePath),
                                  logger: .init(label: "test"))
        #expect { try publisher.publish() } throws: { ($0 as? PublishError)?.code == .canaryFailed }
        func cached() throws -> Int {
            let cache = try EmbeddingCache(path: workspace.cachePath)
            return try chunks.filter {
                try cache.vector(modelKey: workspace.model.cacheKey, textHash: VectorSource.textHash($0), dimension: workspace.model.dimension) != nil
            }.count
        }
        #expect(try cached() == 0)
        _ = try publish(workspace, source, vectors: file)
        #expect(try cached() == chunks.count)
    }

    @Test("Given a vectors file checked against the source, when one chunk's text is changed after the check (same count), then the publish is refused in one line naming that chunk and row, nothing is written, and the cache holds no vector for the new text")
    func sourceChangedAfterCheck() throws {
        let workspace = try Workspace()
        let original = SampleKB.chunks(count: 40)
        let source = try workspace.writeSource(original)
        let (_, rows) = try Self.vectors(source, workspace.embedder)
        let file = workspace.folder + "/vectors.npy"
        try Self.writeNPY(rows, to: file)
        var edited = original
        edited[17].content = "Replaced after the vectors were checked: boil water for three minutes at altitude."
        let replacement = edited
        var configuration = PublishConfiguration(repository: workspace.repo, channel: "stable", source: source)
        configuration.vectors = file
        // The check reads the source before the publish lock; the edit lands once it is held.
        let publisher = Publisher(configuration: configuration, key: workspace.key, embedder: workspace.embedder,
                                  model: workspace.model, cache: try EmbeddingCache(path: workspace.cachePath),
                                  logger: .init(label: "test"), checkpoint: { stage in
            if stage == .locked { _ = try? workspace.writeSource(replacement) }
        })
        #expect {
            try publisher.publish()
        } throws: { error in
            let failure = error as? PublishError
            return failure?.code == .badInput && failure?.message.contains("is not the one row 17 of --vectors was checked as") == true
                && failure?.message.contains("\n") == false
        }
        #expect(workspace.repository.versionNumbers("stable").isEmpty)
        let cache = try EmbeddingCache(path: workspace.cachePath)
        #expect(try cache.vector(modelKey: workspace.model.cacheKey, textHash: VectorSource.textHash(edited[17]),
                                 dimension: workspace.model.dimension) == nil)
    }

    @Test("Given version 1 published from the model's vectors, when version 2's file gives every vector again computed elsewhere (scaled, its last bits changed) and two chunks new text, then each unchanged chunk keeps its own version-1 vector bit for bit (two chunks of one text included) and the delta upserts only the two")
    func recomputedVectorsKeepTheDeltaSmall() throws {
        let workspace = try Workspace()
        var chunks = SampleKB.chunks(count: 40)
        // Two chunks of one text whose given vectors differ: each keeps its own.
        (chunks[21].title, chunks[21].content) = (chunks[20].title, chunks[20].content)
        let first = try workspace.writeSource(chunks)
        var given = try Self.vectors(first, workspace.embedder).rows
        given[21][0] += 1e-3
        try Self.writeNPY(given, to: workspace.folder + "/v1.npy")
        _ = try publish(workspace, first, vectors: workspace.folder + "/v1.npy")

        chunks[3].content += " radio battery"
        chunks[7].content += " torch"
        let second = try workspace.writeSource(chunks, name: "kb-2.json")
        let rows = try Self.vectors(second, workspace.embedder).rows
        let recomputed = rows.enumerated().map { index, row in
            row.enumerated().map { position, value in value * 1.5 + (position == index % row.count ? 1e-3 : 0) }
        }
        try Self.writeNPY(recomputed, to: workspace.folder + "/v2.npy")
        let report = try publish(workspace, second, vectors: workspace.folder + "/v2.npy")
        #expect(report.fromVectorsFile == 2 && report.reusedFromSnapshot == 38)

        let before = Dictionary(uniqueKeysWithValues: try workspace.records(1).map { ($0.chunk.id, $0.vector) })
        let after = Dictionary(uniqueKeysWithValues: try workspace.records(2).map { ($0.chunk.id, $0.vector) })
        for chunk in chunks where chunk.id != "chunk-003" && chunk.id != "chunk-007" {
            #expect(after[chunk.id] == before[chunk.id], "\(chunk.id)")
        }
        #expect(before["chunk-020"] != before["chunk-021"])
        // The two rewritten chunks carry the file's rows (at unit length).
        for index in [3, 7] {
            #expect(SentenceEmbedder.cosine(try #require(after[chunks[index].id]), recomputed[index]) > 0.99999)
        }
        let ref = try #require(try workspace.manifest(2).deltas.first)
        let delta = try Delta.decode(try Zlib.decompress(try workspace.repository.blob(ref.sha256, size: ref.size, what: "delta"),
                                                         expectedSize: ref.uncompressedSize))
        #expect(delta.upserts.map(\.chunk.id) == ["chunk-003", "chunk-007"] && delta.deletes.isEmpty)
    }

    @Test("Given another model's vectors, the right vectors in another order, or the wrong number of rows or columns, when published with --vectors, then it is refused with one line naming the problem (the worst row, for a mismatch) and nothing is written, the embedding cache included")
    func refused() throws {
        let workspace = try Workspace()
        let source = try workspace.writeSource(SampleKB.chunks(count: 40))
        let (chunks, rows) = try Self.vectors(source, workspace.embedder)
        let other = try SentenceEmbedder(directory: try TinyModel(seed: 8).writeFolder())
        let (_, otherRows) = try Self.vectors(source, other)
        // The cache holds the model's own vectors for these texts (an earlier publish, say): no
        // refused file may replace them.
        let cache = try EmbeddingCache(path: workspace.cachePath)
        try cache.store(modelKey: workspace.model.cacheKey, zip(chunks, rows).map { (VectorSource.textHash($0.0), $0.1) })
        let cases: [(name: String, rows: [[Float]], expect: [String])] = [
            ("another model", otherRows, ["row ", "(chunk \"chunk-", "below 0.999", "another model or another chunk order"]),
            ("reversed order", Array(rows.reversed()), ["row ", "below 0.999"]),
            ("one row short", Array(rows.dropLast()), ["39 rows for 40 chunks"]),
            ("a short dimension", rows.map { Array($0.dropLast()) }, ["vectors of dimension \(rows[0].count - 1)"]),
        ]
        for (index, fault) in cases.enumerated() {
            let file = workspace.folder + "/bad-\(index).npy"
            try Self.writeNPY(fault.rows, to: file)
            do {
                _ = try publish(workspace, source, vectors: file)
                Issue.record("\(fault.name): published")
            } catch {
                #expect(error.code == .badInput, "\(fault.name): \(error)")
                #expect(!error.message.contains("\n"))
                for text in fault.expect { #expect(error.message.contains(text), "\(fault.name): \(error.message)") }
            }
        }
        // The worst row is named: for another model's vectors, its cosine is the lowest of all.
        let cosines = zip(rows, otherRows).map { SentenceEmbedder.cosine($0, $1) }
        let worst = cosines.indices.min { cosines[$0] < cosines[$1] }!
        try Self.writeNPY(otherRows, to: workspace.folder + "/other.npy")
        #expect(throws: PublishError.self) { try publish(workspace, source, vectors: workspace.folder + "/other.npy") }
        do { _ = try publish(workspace, source, vectors: workspace.folder + "/other.npy") } catch {
            #expect(error.message.contains("row \(worst) (chunk \"\(chunks[worst].id)\")"), "\(error.message)")
        }
        #expect(!FileManager.default.fileExists(atPath: workspace.repository.manifestPath("stable")))
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: workspace.repo + "/blobs")) ?? []).isEmpty)
        for (chunk, row) in zip(chunks, rows) {
            let cached = try cache.vector(modelKey: workspace.model.cacheKey, textHash: VectorSource.textHash(chunk),
                                          dimension: workspace.model.dimension)
            #expect(cached == row, "chunk \(chunk.id): the cache holds a refused file's vector")
        }
    }

    @Test("Given a vectors file cut after it was opened (np.save into it during a publish), when a row past the cut is read, then it is all zero (refused by the norm check), not a row part zero published scaled")
    func rowReadShort() throws {
        let workspace = try Workspace()
        let file = workspace.folder + "/cut.npy"
        try Self.writeNPY([[Float]](repeating: [1, 2, 3, 4], count: 4), to: file)
        let vectors = try SuppliedVectors(path: file)
        #expect(vectors.row(3) == [1, 2, 3, 4])
        // Cut mid-row: the last row's last two values gone.
        let size = try #require(try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int)
        #expect(truncate(file, off_t(size - 8)) == 0)
        #expect(vectors.row(3) == [0, 0, 0, 0])
        #expect(vectors.row(2) == [1, 2, 3, 4])
    }

    @Test("Given a file of 40 rows, half of them another model's, and a sample of 8, when published twice, then both publishes are refused with the same line, naming a wrong row that the file's own sample holds; a file that differs in one row is sampled on other rows")
    func sampleRepeats() throws {
        let workspace = try Workspace()
        let source = try workspace.writeSource(SampleKB.chunks(count: 40))
        let (_, rows) = try Self.vectors(source, workspace.embedder)
        let other = try SentenceEmbedder(directory: try TinyModel(seed: 8).writeFolder())
        let (_, otherRows) = try Self.vectors(source, other)
        let wrong = Set(stride(from: 1, to: 40, by: 2))
        let mixed = rows.indices.map { wrong.contains($0) ? otherRows[$0] : rows[$0] }
        let file = workspace.folder + "/mixed.npy"
        try Self.writeNPY(mixed, to: file)
        let sample = try SuppliedVectors(path: file).sampleRows(8)
        #expect(sample.count == 8)
        #expect(try SuppliedVectors(path: file).sampleRows(8) == sample)
        #expect(!sample.isDisjoint(with: wrong), "the sample holds no wrong row: choose another file for this test")
        var lines: [String] = []
        for _ in 0..<2 {
            do {
                _ = try publish(workspace, source, vectors: file, sample: 8)
                Issue.record("published")
            } catch {
                #expect(error.code == .badInput)
                lines.append(error.message)
            }
        }
        #expect(lines.count == 2 && lines[0] == lines[1], "\(lines)")
        let named = lines.first.flatMap { line in
            line.firstRange(of: "row ").map { Int(line[$0.upperBound...].prefix { $0.isNumber }) } ?? nil
        }
        #expect(named.map { sample.contains($0) && wrong.contains($0) } == true, "named row \(String(describing: named))")
        // One row's last bits changed: another file, another seed, another sample.
        var changed = mixed
        changed[0][0] = changed[0][0].nextUp
        try Self.writeNPY(changed, to: workspace.folder + "/changed.npy")
        #expect(try SuppliedVectors(path: workspace.folder + "/changed.npy").sampleRows(8) != sample)
    }

    @Test("Given a file that is not .npy, big-endian, Fortran-ordered, or of a shape no file can hold, when read, then one line says what it is and what to do")
    func badFiles() throws {
        let folder = try TemporaryDirectory.make()
        try Data("not numpy".utf8).write(to: URL(fileURLWithPath: folder + "/text.npy"))
        try Self.writeNPY([[1, 2], [3, 4]], to: folder + "/good.npy")
        var big = try Data(contentsOf: URL(fileURLWithPath: folder + "/good.npy"))
        big.replaceSubrange(big.range(of: Data("<f4".utf8))!, with: Data(">f4".utf8))
        try big.write(to: URL(fileURLWithPath: folder + "/big.npy"))
        var fortran = try Data(contentsOf: URL(fileURLWithPath: folder + "/good.npy"))
        fortran.replaceSubrange(fortran.range(of: Data("False".utf8))!, with: Data("True ".utf8))
        try fortran.write(to: URL(fileURLWithPath: folder + "/fortran.npy"))
        // A shape whose bytes overflow an Int (2^62 rows of 2 float32 values), over 16 bytes of data.
        try Data(Self.npyHeader(descr: "<f4", shape: "(4611686018427387904, 2)") + [UInt8](repeating: 0, count: 16))
            .write(to: URL(fileURLWithPath: folder + "/huge.npy"))
        let good = try SuppliedVectors(path: folder + "/good.npy")
        #expect(good.rows == 2 && good.dimension == 2 && good.row(1) == [3, 4])
        for (name, expected) in [("text", "not a NumPy .npy file"), ("big", "is not little-endian float32 or float16"),
                                 ("fortran", "Fortran order"), ("huge", "needs more bytes than a file can hold")] {
            #expect {
                _ = try SuppliedVectors(path: folder + "/\(name).npy")
            } throws: { error in
                (error as? PublishError)?.code == .badInput && (error as? PublishError)?.message.contains(expected) == true
            }
        }
    }
}
