import CairnCore
@testable import CairnIndex
import CairnTestSupport
import Foundation
import Testing

/// A long query of common words at scale is scored whole from FTS5's own postings, read word by
/// word (`FullTextPostings`, `RankingConfiguration.lexicalPostingsAbove`); forced on here at test
/// size, against the same index searched whole through FTS5 queries.
@Suite("Lexical search scored from FTS5's postings")
struct LexicalPostingsTests {
    static let postings = RankingConfiguration(approximateLexicalAbove: 0, lexicalPostingsAbove: 0)
    static let whole = RankingConfiguration(approximateLexicalAbove: .max)

    /// `PrunedLexicalTests.entries` (4,000 rows of Zipf-distributed words: the commonest word's
    /// doclist runs over many leaves) and three rows whose poslists are longer than a leaf (one
    /// word thousands of times, in the content, in the title, in both).
    static func entries() -> [ChunkRecord] {
        let long = [("long-content", "", String(repeating: "w1 ", count: 6_000)),
                    ("long-title", String(repeating: "w2 ", count: 5_000), "w3 w4"),
                    ("long-both", String(repeating: "w0 w5 ", count: 1_500), String(repeating: "w5 w0 w6 ", count: 2_000))]
        return PrunedLexicalTests.entries() + long.map { id, title, content in
            ChunkRecord(chunk: Chunk(id: id, title: title, content: content), vector: unit((0..<32).map { Float($0 % 7) - 3 }))
        }
    }

    static let queries = PrunedLexicalTests.queries + PrunedLexicalTests.commonQueries + ["w1 w2 w3", "w0 w5 w6 w399"]

    static func open(_ path: String) throws -> (postings: SearchIndex, whole: SearchIndex) {
        (try SearchIndex(path: path, configuration: postings), try SearchIndex(path: path, configuration: whole))
    }

    /// Every query's lists (10 and 100 deep) from both indexes: the same rows, scores and moments.
    static func expectSameAnswers(_ postings: SearchIndex, _ whole: SearchIndex, exactMoments: Bool) throws {
        for query in queries {
            for limit in [10, 100] {
                let a = try postings.lexical(query, limit: limit, mask: nil), b = try whole.lexical(query, limit: limit, mask: nil)
                #expect(a.fromPostings, "\(query): not scored from the postings")
                #expect(!a.list.isEmpty)
                #expect(a.list.map(\.id) == b.list.map(\.id), "\(query) limit \(limit)")
                // cairn_bm25's operations in its order: the same doubles.
                #expect(a.list.map(\.score) == b.list.map(\.score), "\(query) limit \(limit)")
                #expect(a.moments.count == b.moments.count)
                if exactMoments {
                    #expect(a.moments == b.moments, "\(query)")
                } else {
                    // Rows a delta rewrote are summed in another order than FTS5's rowids.
                    #expect(abs(a.moments.sum / b.moments.sum - 1) < 1e-12 && abs(a.moments.sumOfSquares / b.moments.sumOfSquares - 1) < 1e-12, "\(query)")
                }
            }
        }
    }

    @Test("Given rows of Zipf-distributed words and poslists longer than a leaf, when queries are scored from the postings and through FTS5, then the lists are the same rows with the same scores and the moments are equal")
    func postingsEqualWhole() throws {
        try withTemporaryDirectory { directory in
            let path = try Self.written(Self.entries(), in: directory)
            let (postings, whole) = try Self.open(path)
            try Self.expectSameAnswers(postings, whole, exactMoments: true)
        }
    }

    @Test("Given an index changed by two deltas (rows rewritten, deleted and added, each delta a new FTS5 segment with delete entries), when queries are scored from the postings, then they equal the search through FTS5")
    func postingsAfterDeltasEqualWhole() throws {
        try withTemporaryDirectory { directory in
            var entries = Self.entries()
            let path = try Self.written(entries, in: directory)
            var random = SplitMix64(seed: 23)
            for version in 2...3 {
                // Every 13th row rewritten (common words dropped, others added), every 29th deleted, 200 added.
                var upserts: [ChunkRecord] = [], deletes: [String] = []
                for (index, entry) in entries.enumerated() where index % 13 == version || index % 29 == version {
                    if index % 29 == version { deletes.append(entry.chunk.id); continue }
                    let content = "w\(random.next() % 50) w\(300 + random.next() % 100) w0 w1 w\(version)"
                    upserts.append(ChunkRecord(chunk: Chunk(id: entry.chunk.id, title: "w\(version + 7)", content: content), vector: entry.vector))
                }
                for index in 0..<200 {
                    let content = (0..<8).map { _ in "w\(random.next() % 400)" }.joined(separator: " ")
                    upserts.append(ChunkRecord(chunk: Chunk(id: "v\(version)-\(index)", title: "", content: content),
                                               vector: unit((0..<32).map { _ in random.normal() })))
                }
                let changed = Dictionary(uniqueKeysWithValues: upserts.map { ($0.chunk.id, $0) })
                entries = entries.filter { !deletes.contains($0.chunk.id) }.map { changed[$0.chunk.id] ?? $0 }
                    + upserts.filter { id in !entries.contains { $0.chunk.id == id.chunk.id } }
                try SnapshotWriter.apply(upserts: upserts, deletes: deletes, newMeta: Self.meta(version: version, entries), to: path)
            }
            let structure = try #require(try FullTextPostings.read(try Database(path: path, mode: .readOnly(immutable: true))))
            #expect(structure.segments.count > 1, "the deltas should have left segments of their own")
            let (postings, whole) = try Self.open(path)
            try Self.expectSameAnswers(postings, whole, exactMoments: false)
        }
    }

    @Test("Given the default threshold, when queries are searched, then those whose words are in more than a fifth of the index's rows together are scored from the postings and the others are not")
    func defaultThresholdIsAFifthOfTheRows() throws {
        try withTemporaryDirectory { directory in
            let path = try Self.written(Self.entries(), in: directory)
            let index = try SearchIndex(path: path, configuration: RankingConfiguration(approximateLexicalAbove: 0))
            let db = try Database(path: path, mode: .readOnly(immutable: false))
            let matches = try db.prepare("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?1")
            var sides: Set<Bool> = []
            for query in Self.queries + ["w350 w399", "w250 w300 w399", "w40 w41 w42"] {
                let words = query.split(separator: " ").map(String.init)
                let counts = try words.map { word in
                    matches.reset()
                    try matches.bind("\"\(word)\"", at: 1)
                    _ = try matches.step()
                    return matches.int64(at: 0)
                }
                // The words searched: those in under half of the rows (`informative`).
                let together = SearchIndex.informative(words, counts: counts, rows: 4_003).1.reduce(0, +)
                let heavy = together > 4_003 / 5
                sides.insert(heavy)
                #expect(try index.lexical(query, limit: 10, mask: nil).fromPostings == heavy, "\(query): in \(together) rows together")
            }
            #expect(sides == [true, false], "the queries fall on both sides of the threshold")
        }
    }

    @Test("Given every word of the index, the rows its postings give are the rows FTS5 matches for it")
    func everyWordsRows() throws {
        try withTemporaryDirectory { directory in
            let path = try Self.written(Self.entries(), in: directory)
            let db = try Database(path: path, mode: .readOnly(immutable: true))
            let structure = try #require(try FullTextPostings.read(db))
            let words = (0..<400).map { "w\($0)" }
            let terms = try #require(try FullTextPostings.terms(for: words, db: db))
            let match = try db.prepare("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?1 ORDER BY rowid")
            for (word, term) in zip(words, terms) {
                var rows: [Int64] = []
                let read = try structure.forEachRow(holding: try #require(term)) { rowid, _ in rows.append(rowid) }
                #expect(read, "\(word): a leaf was not as expected")
                match.reset()
                try match.bind("\"\(word)\"", at: 1)
                var expected: [Int64] = []
                while try match.step() { expected.append(match.int64(at: 0)) }
                #expect(rows.sorted() == expected, "\(word): \(rows.count) rows against \(expected.count)")
            }
        }
    }

    @Test("Given the table's tokenizer, a query word is searched as the term FTS5 indexed it (stemmed, folded), and a word that is not one token has none")
    func termsAreTheTokenizers() throws {
        try withTemporaryDirectory { directory in
            let path = try Self.written(Self.entries(), in: directory)
            let db = try Database(path: path, mode: .readOnly(immutable: true))
            let terms = try #require(try FullTextPostings.terms(for: ["running", "Café", "w12", "x y"], db: db))
            #expect(terms.map { $0.map { String(decoding: $0, as: UTF8.self) } } == ["run", "cafe", "w12", nil])
        }
    }

    /// `entries` as version 1 of an index in `directory`; its path.
    static func written(_ entries: [ChunkRecord], in directory: String) throws -> String {
        let path = (directory as NSString).appendingPathComponent("index.sqlite")
        try SnapshotWriter.create(at: path, meta: meta(version: 1, entries), entries: entries)
        return path
    }

    static func meta(version: Int, _ entries: [ChunkRecord]) -> SnapshotMeta {
        SnapshotMeta(channel: "test", version: version, dimension: 32, modelID: "synthetic", entries: entries)
    }

    /// A 9-byte varint of all ones (-1), where a damaged record could hold one.
    static let minusOne = [UInt8](repeating: 0xFF, count: 9)

    @Test("Given a leaf whose term offset, shared prefix or poslist size is a negative varint, or whose next term starts past its end, when the doclist is read, then the reader says malformed (FTS5 then answers), never traps or reads before the leaf")
    func negativeVarintsAreMalformed() {
        let key = Array("0water".utf8)
        // Header: no rowid before the first term; the footer (term offsets) at byte 4.
        let negativeOffset: [UInt8] = [0, 0, 0, 4] + Self.minusOne
        // A term before the key at offset 4, then a second term whose shared prefix is -1.
        let apple = Array("0apple".utf8)
        let term = [UInt8(apple.count)] + apple + [2, 0]  // its length, its bytes, first rowid 2, a poslist of size 0
        let negativeShared: [UInt8] = [0, 0, 0, UInt8(4 + term.count + 9 + 1)] + term + Self.minusOne + [0] + [4, UInt8(term.count)]
        // The term, its first rowid, then a poslist size of -1.
        let body = [UInt8(key.count)] + key + [2] + Self.minusOne
        let negativeSize: [UInt8] = [0, 0, 0, UInt8(4 + body.count)] + body + [4]
        for (name, leaf) in [("term offset", negativeOffset), ("shared prefix", negativeShared), ("poslist size", negativeSize)] {
            var decoder = DoclistDecoder()
            let result = leaf.withUnsafeBytes { decoder.start(key, on: $0) { _, _ in } }
            #expect(result == nil, "\(name)")
        }
        // The key's doclist (first rowid 2, a poslist of 50 bytes) ends where the next term
        // starts, and a damaged footer puts that start 100 bytes on, past the leaf's end.
        let cut = [UInt8(key.count)] + key + [2, 100]
        let pastTheLeaf: [UInt8] = [0, 0, 0, UInt8(4 + cut.count)] + cut + [4, 100]
        var decoder = DoclistDecoder()
        let past = pastTheLeaf.withUnsafeBytes { decoder.start(key, on: $0) { _, _ in } }
        #expect(past == nil, "a term offset past the leaf")
        #expect(DocumentLengths.varint(UnsafeRawBufferPointer(start: nil, count: 0), at: -1) == nil)
        #expect(throws: IndexError.self) { try (Self.minusOne + [3]).withUnsafeBytes { try DocumentLengths.total($0) } }
    }
}
