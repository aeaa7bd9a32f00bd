import CairnCore
import Foundation
import Testing
@testable import CairnIndex

/// `cairn_bm25` must be FTS5's `bm25()` with row lengths read from memory: the same score, bit
/// for bit, for every row of every query, with rowids that run without gaps and with gaps.
@Suite struct BM25FunctionTests {
    /// Queries that hit one row, many rows, title and content, repeated and non-Latin words.
    static let queries: [[String]] = [
        ["water"], ["water", "boil"], ["children", "ventilation", "kerosene"], ["flood", "ground", "moving", "water"],
        ["避難所"], ["cafe", "lait"], ["burn", "bleeding", "use"], ["earthquake", "aftershocks", "gas"],
    ]

    /// (rowid, bm25, cairn_bm25, cairn_bm25 given the document counts) for every row the tokens match.
    func scores(_ db: Database, _ tokens: [String], counts: [Int64],
                weights: (Double, Double)) throws -> [(Int64, Double, Double, Double)] {
        let statement = try db.prepare("""
            SELECT rowid, bm25(chunks_fts, ?1, ?2), cairn_bm25(chunks_fts, ?1, ?2), cairn_bm25(chunks_fts, ?1, ?2, ?4)
            FROM chunks_fts WHERE chunks_fts MATCH ?3
            """)
        try statement.bind(weights.0, at: 1)
        try statement.bind(weights.1, at: 2)
        try statement.bind(LexicalQuery.expression(tokens), at: 3)
        try statement.bind(BM25Function.encode(counts), at: 4)
        var rows: [(Int64, Double, Double, Double)] = []
        while try statement.step() {
            rows.append((statement.int64(at: 0), statement.double(at: 1), statement.double(at: 2), statement.double(at: 3)))
        }
        return rows
    }

    func expectSameScores(at path: String) throws {
        let db = try Database(path: path, mode: .readOnly(immutable: true))
        try BM25Function.register(on: db, lengths: DocumentLengths(contents: try Snapshot.scan(at: path, check: .storedHashes)))
        let documentCounts = DocumentCounts()
        var compared = 0
        for tokens in Self.queries {
            let counts = try documentCounts.counts(of: tokens, db: db)
            for weights in [(10.0, 1.0), (1.0, 1.0), (2.5, 0.5)] {
                for (rowid, fts5, ours, given) in try scores(db, tokens, counts: counts, weights: weights) {
                    #expect(fts5.bitPattern == ours.bitPattern, "rowid \(rowid), \(tokens): bm25 \(fts5), cairn_bm25 \(ours)")
                    #expect(fts5.bitPattern == given.bitPattern, "rowid \(rowid), \(tokens): bm25 \(fts5), with counts \(given)")
                    compared += 1
                }
            }
        }
        #expect(compared > 40)
    }

    @Test("Given a fresh snapshot, when queried, then cairn_bm25 equals FTS5's bm25 bit for bit on every row")
    func freshSnapshot() throws {
        try withTemporaryDirectory { directory in
            try expectSameScores(at: try Corpus.snapshot(in: directory))
        }
    }

    @Test("Given a snapshot whose rowids have gaps after a delta, when queried, then cairn_bm25 still equals bm25")
    func afterDelta() throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            let kept = Corpus.entries.filter { !["water-storage", "quake-cover", "aid-burns"].contains($0.chunk.id) }
            let added = Chunk(id: "water-new", title: "Water and more water",
                              content: "Boil the water; water again; then water the children's garden.", scenario: "flood")
            let entries = kept + [ChunkRecord(chunk: added, vector: unit(1, 1, 0, 0))]
            try SnapshotWriter.apply(upserts: [ChunkRecord(chunk: added, vector: unit(1, 1, 0, 0))], deletes: ["water-storage", "quake-cover", "aid-burns"],
                                     newMeta: Corpus.meta(version: 2, entries: entries), to: path)
            let db = try Database(path: path, mode: .readOnly(immutable: true))
            let rowids = try db.prepare("SELECT id FROM chunks_fts_docsize ORDER BY id")
            var ids: [Int64] = []
            while try rowids.step() { ids.append(rowids.int64(at: 0)) }
            #expect(ids.last! - ids.first! + 1 > Int64(ids.count), "the delta should leave gaps in the rowids: \(ids)")
            try expectSameScores(at: path)
        }
    }

    @Test("Given k1 and b, when scoring, then FTS5's values give bm25 to the bit and others give the formula's value")
    func givenK1AndB_whenScoring_thenTheFormulaUsesThem() throws {
        // Four chunks; "water" only in the first, twice in its content. Lengths in tokens
        // (title + content): 4, 2, 4, 3, so N = 4, average 13 / 4 = 3.25; n(water) = 1, so
        // IDF = ln((4 − 1 + 0.5) / (1 + 0.5)) = ln(7 / 3).
        let texts = [("Rain", "water water stone"), ("Sun", "stone"), ("Sky", "stone stone stone"), ("Sea", "salt salt")]
        let entries = texts.enumerated().map { index, text in
            ChunkRecord(chunk: Chunk(id: "c\(index)", title: text.0, content: text.1), vector: unit(1, Float(index), 0, 0))
        }
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory, entries: entries)
            let db = try Database(path: path, mode: .readOnly(immutable: true))
            try BM25Function.register(on: db, lengths: DocumentLengths(contents: try Snapshot.scan(at: path, check: .storedHashes)))
            let statement = try db.prepare("""
                SELECT bm25(chunks_fts, 1.0, 1.0), cairn_bm25(chunks_fts, 1.0, 1.0, ?2, 1.2, 0.75),
                       cairn_bm25(chunks_fts, 1.0, 1.0, ?2, 1.5, 0.4), cairn_bm25(chunks_fts, 1.0, 1.0, ?2, 2.0, 0.0)
                FROM chunks_fts WHERE chunks_fts MATCH ?1
                """)
            try statement.bind(LexicalQuery.expression(["water"]), at: 1)
            try statement.bind(BM25Function.encode([1]), at: 2)
            #expect(try statement.step())
            let (fts5, same, tuned, flat) = (statement.double(at: 0), statement.double(at: 1), statement.double(at: 2), statement.double(at: 3))
            #expect(try !statement.step())

            let idf = log(7.0 / 3.0)
            // k1 1.5, b 0.4: 2 · 2.5 / (2 + 1.5 · (0.6 + 0.4 · 4 / 3.25)) ≈ 1.374207.
            let expectedTuned = -idf * (2 * 2.5) / (2 + 1.5 * (0.6 + 0.4 * 4 / 3.25))
            // b 0: the length does not count; k1 2: 2 · 3 / (2 + 2) = 1.5.
            let expectedFlat = -idf * 1.5
            #expect(same.bitPattern == fts5.bitPattern)
            #expect(abs(tuned - expectedTuned) < 1e-12 && abs(tuned - -1.164362) < 1e-6)
            #expect(abs(flat - expectedFlat) < 1e-12)
        }
    }

    @Test("Given SQLite varints of 1 to 9 bytes, when decoded, then each gives its value and length")
    func varints() {
        let cases: [([UInt8], Int64)] = [
            ([0x00], 0), ([0x7F], 127), ([0x81, 0x00], 128), ([0x82, 0x80, 0x01], 32769),
            ([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01], 1),
        ]
        for (bytes, value) in cases {
            bytes.withUnsafeBytes { raw in
                let decoded = DocumentLengths.varint(raw, at: 0)
                #expect(decoded?.0 == value && decoded?.1 == bytes.count, "\(bytes)")
            }
        }
        [UInt8]([0x81]).withUnsafeBytes { raw in #expect(DocumentLengths.varint(raw, at: 0) == nil) }
    }
}
