import CairnCore
@testable import CairnIndex
import Foundation
import Testing

/// `Snapshot.scan`: the one pass over the rows that checks an install and writes the rows files
/// the search index maps, so that the new version (and every restart) opens without reading
/// every row again.
@Suite struct ScanTests {
    static let requests = [
        SearchRequest(query: "boil water", k: 5, mode: .hybrid),
        SearchRequest(query: "burns", k: 5, mode: .lexical),
        SearchRequest(query: "storage", k: 5, mode: .dense),
        SearchRequest(query: "water", k: 5, mode: .hybrid, scenario: "flood"),
    ]

    @Test(arguments: [Snapshot.RowCheck.storedHashes, .recomputedHashes])
    func givenASnapshot_whenScannedAndOpenedWithTheContents_thenEveryAnswerEqualsAnIndexThatReadsItsRows(check: Snapshot.RowCheck) throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            let contents = try Snapshot.scan(at: path, check: check, expectedStateRoot: Corpus.meta().stateRoot)
            #expect(contents.meta == Corpus.meta() && contents.count == Corpus.entries.count)

            let preloaded = try SearchIndex(path: path, contents: contents)
            // Another copy of the file, without rows files: opening it scans its rows.
            let copy = (directory as NSString).appendingPathComponent("copy.sqlite")
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            let reading = try SearchIndex(path: copy)
            #expect(preloaded.rowsSource == .rowsFiles && reading.rowsSource == .scanned)
            for request in Self.requests {
                let vector = unit(0.2, 0.4, 0.4, 0.8)
                let a = try preloaded.search(request, queryVector: vector).results
                let b = try reading.search(request, queryVector: vector).results
                #expect(!b.isEmpty)
                #expect(a.map(\.chunk) == b.map(\.chunk))
                #expect(a.map(\.fusedScore) == b.map(\.fusedScore))
            }
        }
    }

    @Test func givenRowsFilesBesideASnapshot_whenOpenedAgain_thenNoRowIsReadAndTheAnswersAreTheSame() throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            let first = try SearchIndex(path: path)
            #expect(first.rowsSource == .scanned)
            // Every row's vector and stored hashes broken behind the rows files' back (a scan would
            // refuse both): an index that opens from the rows files alone never reads them.
            try Database(path: path, mode: .readWrite).exec("UPDATE chunks SET embedding = zeroblob(16), content_hash = 'xyz'")
            let broken = (directory as NSString).appendingPathComponent("broken.sqlite")
            try FileManager.default.copyItem(atPath: path, toPath: broken)
            #expect { try Snapshot.scan(at: broken, check: .storedHashes) } throws: { ($0 as? IndexError)?.code == .hashMismatch }
            let second = try SearchIndex(path: path)
            #expect(second.rowsSource == .rowsFiles)
            let vector = unit(0.2, 0.4, 0.4, 0.8)
            let tagged = SearchRequest(query: "water", k: 5, mode: .lexical, tags: ["water"])
            #expect(try second.search(tagged, queryVector: vector).results.map(\.chunk.id)
                    == first.search(tagged, queryVector: vector).results.map(\.chunk.id))
            #expect(try !second.search(tagged, queryVector: vector).results.isEmpty)
            // Rows files of another version are not used: the meta's state root names the rows.
            try Database(path: path, mode: .readWrite).exec("UPDATE meta SET value = '\(ContentID(hashing: [1]).hex)' WHERE key = 'state_root'")
            #expect(try IndexContents.open(beside: path, meta: try Snapshot.meta(at: path)) == nil)
        }
    }

    @Test(arguments: [2, 3])
    func givenASnapshotWithRowidGaps_whenScannedInPartsAndCombined_thenEveryAnswerEqualsAOnePartScan(parts: Int) throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            // Deleting rows leaves gaps in the rowids, as a delta's deletes do.
            try Database(path: path, mode: .readWrite).exec("DELETE FROM chunks WHERE id IN ('water-storage', 'quake-after')")
            let remaining = Corpus.entries.filter { !["water-storage", "quake-after"].contains($0.chunk.id) }
            let meta = Corpus.meta(entries: remaining)
            try Database(path: path, mode: .readWrite).exec(
                "UPDATE meta SET value = '\(meta.stateRoot.hex)' WHERE key = 'state_root'; UPDATE meta SET value = '8' WHERE key = 'chunk_count'")

            let scan = try Snapshot.RowScan(at: path, check: .recomputedHashes, parts: parts)
            // Rowids with gaps cannot be cut by number: one part.
            #expect(scan.parts == 1)
            let combined = try scan.finish([scan.part(0)], expectedStateRoot: meta.stateRoot, durable: false)
            let copy = (directory as NSString).appendingPathComponent("copy.sqlite")
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            let whole = try Snapshot.scan(at: copy, check: .recomputedHashes, expectedStateRoot: meta.stateRoot)
            #expect(combined.count == 8 && whole.count == 8)

            let a = try SearchIndex(path: path, contents: combined), b = try SearchIndex(path: copy, contents: whole)
            for request in Self.requests + [SearchRequest(query: "shelter", k: 5, mode: .hybrid, scenario: "earthquake")] {
                let vector = unit(0.2, 0.4, 0.4, 0.8)
                #expect(try a.search(request, queryVector: vector).results == b.search(request, queryVector: vector).results)
            }
        }
    }

    /// Read through the page cache (a small snapshot's install) and around it (a large one's).
    @Test(arguments: [2, 3], [false, true])
    func givenASnapshotWrittenWhole_whenScannedInParts_thenEveryAnswerEqualsAOnePartScan(parts: Int, readingDirect: Bool) throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            let scan = try Snapshot.RowScan(at: path, check: .recomputedHashes, parts: parts, readingDirect: readingDirect)
            #expect(scan.parts == parts)
            let split = try (0..<parts).map { try scan.part($0) }
            let combined = try scan.finish(split, expectedStateRoot: Corpus.meta().stateRoot, durable: false)
            let copy = (directory as NSString).appendingPathComponent("copy.sqlite")
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            let whole = try Snapshot.scan(at: copy, check: .recomputedHashes, expectedStateRoot: Corpus.meta().stateRoot)
            DerivedContentsTests.expectSameRows(combined, whole)
            // A part missing is refused, not served short.
            let again = try Snapshot.RowScan(at: path, check: .recomputedHashes, parts: parts)
            #expect { try again.finish(Array(split.dropLast()), expectedStateRoot: nil, durable: false) } throws: { error in
                (error as? IndexError)?.code == .stateRootMismatch
            }
        }
    }

    @Test func givenARowWhoseTextChangedButNotItsStoredHash_whenScannedWithRecomputedHashes_thenHashMismatch() throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            try Database(path: path, mode: .readWrite).exec("UPDATE chunks SET content = 'drink flood water' WHERE id = 'aid-burns'")

            #expect { try Snapshot.scan(at: path, check: .recomputedHashes, expectedStateRoot: Corpus.meta().stateRoot) } throws: { error in
                (error as? IndexError)?.code == .hashMismatch
            }
            // Opening to serve checks nothing of the kind: the file was verified when installed.
            #expect(try Snapshot.scan(at: path, check: .storedHashes).count == Corpus.entries.count)
        }
    }

    @Test func givenARowAndItsStoredHashChanged_whenScannedWithRecomputedHashes_thenTheStateRootMismatches() throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            let text = "drink flood water"
            try Database(path: path, mode: .readWrite).exec(
                "UPDATE chunks SET content = '\(text)', content_hash = '\(ContentID(hashing: Array(text.utf8)).hex)' WHERE id = 'aid-burns'")

            #expect { try Snapshot.scan(at: path, check: .recomputedHashes, expectedStateRoot: Corpus.meta().stateRoot) } throws: { error in
                (error as? IndexError)?.code == .stateRootMismatch
            }
        }
    }

    @Test func givenAnotherExpectedStateRoot_whenScanned_thenItIsRefused() throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            #expect { try Snapshot.scan(at: path, check: .recomputedHashes, expectedStateRoot: ContentID(hashing: [1, 2, 3])) } throws: { error in
                (error as? IndexError)?.code == .stateRootMismatch
            }
        }
    }

    @Test(arguments: [
        "UPDATE chunks SET title = 'Purifying \"water\"' WHERE id = 'water-purify'",
        "UPDATE chunks SET content = 'Boil it.' WHERE id = 'water-purify'",
        "UPDATE chunks SET tags = '[\"water\"]' WHERE id = 'water-purify'",
        "UPDATE chunks SET source = NULL WHERE id = 'water-purify'",
        "UPDATE chunks SET scenario = 'earthquake' WHERE id = 'water-purify'",
        "UPDATE chunks SET metadata_hash = upper(metadata_hash) WHERE id = 'water-purify'",
        "UPDATE chunks SET content_hash = 'xyz' WHERE id = 'water-purify'",
    ])
    func givenOneRowAlteredWithoutItsStoredHash_whenScannedRecomputing_thenTheHashCheckFails(sql: String) throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            try Database(path: path, mode: .readWrite).exec(sql)

            #expect { try Snapshot.scan(at: path, check: .recomputedHashes) } throws: { error in
                (error as? IndexError)?.code == .hashMismatch
            }
            #expect { try Snapshot.records(at: path) } throws: { error in (error as? IndexError)?.code == .hashMismatch }
        }
    }

    @Test func givenRowsWithEscapedTextAndNoOptionalFields_whenScannedRecomputing_thenTheRootEqualsTheChunkBasedOne() throws {
        try withTemporaryDirectory { directory in
            // Quotes, backslashes, control characters, non-ASCII text, no scenario or source, ids
            // whose rowid order is not their byte order: what the row check writes itself.
            let entries: [ChunkRecord] = [
                ChunkRecord(chunk: Chunk(id: "z-last", title: "Say \"hi\"\\ \u{1}", content: "Line\nbreak\ttab", tags: ["a\"b", "ü"]), vector: unit(1, 0, 0, 0)),
                ChunkRecord(chunk: Chunk(id: "a-first", title: "", content: "Plain café text.", scenario: "flood", source: "x\\y"), vector: unit(0, 1, 0, 0)),
                ChunkRecord(chunk: Chunk(id: "m-middle", title: "Ωmega", content: "", tags: []), vector: unit(0, 0, 1, 0)),
            ]
            let meta = Corpus.meta(entries: entries)
            let path = (directory as NSString).appendingPathComponent("escaped.sqlite")
            try SnapshotWriter.create(at: path, meta: meta, entries: entries)

            let contents = try Snapshot.scan(at: path, check: .recomputedHashes, expectedStateRoot: meta.stateRoot)
            #expect(contents.count == 3)
            #expect(StateRoot.compute(try Snapshot.records(at: path)) == meta.stateRoot)
        }
    }

}
