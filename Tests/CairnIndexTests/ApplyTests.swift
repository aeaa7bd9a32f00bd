import CairnCore
@testable import CairnIndex
import CairnTestSupport
import Foundation
import Testing

@Suite struct ApplyTests {
    let changed = Chunk(id: "lighting", title: "Lighting without power",
                        content: "A hand-crank semaphore lantern needs no batteries.", scenario: "general", tags: ["power"])
    let added = Chunk(id: "new-zeppelin", title: "Airship sightings", content: "Zeppelin sightings are rare.", scenario: "general")

    /// The corpus after the delta: `quake-after` deleted, `lighting` changed, `new-zeppelin` added.
    var expected: [ChunkRecord] {
        Corpus.entries.filter { $0.chunk.id != "quake-after" }
            .map { $0.chunk.id == "lighting" ? ChunkRecord(chunk: changed, vector: unit(0, 0, 0.6, 0.8)) : $0 }
            + [ChunkRecord(chunk: added, vector: unit(0.6, 0.8, 0, 0))]
    }

    func copy(of path: String, in directory: String) throws -> String {
        let copy = (directory as NSString).appendingPathComponent("next.sqlite")
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        return copy
    }

    /// With a rollback journal, or none (`.discarded`, as a device's install applies a delta).
    @Test(arguments: [SnapshotWriter.Refused.rolledBack, .discarded])
    func givenUpsertsAndDeletes_whenApplied_thenSearchSeesNewTextOnlyAndTheStateRootMatches(ifRefused: SnapshotWriter.Refused) throws {
        try withTemporaryDirectory { directory in
            let original = try Corpus.snapshot(in: directory)
            let next = try copy(of: original, in: directory)
            let newMeta = Corpus.meta(version: 2, entries: expected)

            let edit = SnapshotWriter.Edit(upserts: [ChunkRecord(chunk: changed, vector: unit(0, 0, 0.6, 0.8)),
                                                     ChunkRecord(chunk: added, vector: unit(0.6, 0.8, 0, 0))],
                                           deletes: ["quake-after"])
            try SnapshotWriter.apply([edit], newMeta: newMeta, to: next, check: .storedHashes, ifRefused: ifRefused)

            #expect(try Snapshot.verify(at: next, expectedStateRoot: newMeta.stateRoot) == newMeta)
            #expect(StateRoot.compute(try Snapshot.records(at: next))
                    == StateRoot.compute(expected.map { StateRoot.Record(chunk: $0.chunk, embedding: $0.vector) }))
            let index = try SearchIndex(path: next)
            func found(_ query: String) throws -> [String] {
                try index.search(SearchRequest(query: query, k: 10, mode: .lexical), queryVector: nil).results.map(\.chunk.id)
            }
            #expect(try found("semaphore") == ["lighting"])
            #expect(try found("zeppelin") == ["new-zeppelin"])
            #expect(try found("candles").isEmpty)        // the old text of `lighting`
            #expect(try found("aftershocks").isEmpty)    // the deleted chunk
            #expect(try index.chunk(id: "lighting") == changed)
            #expect(try index.chunk(id: "quake-after") == nil)
            #expect(index.count == expected.count && index.meta.version == 2)
            let dense = try index.search(SearchRequest(query: "", k: 1, mode: .dense), queryVector: unit(0.6, 0.8, 0, 0))
            #expect(dense.results.first?.chunk.id == "new-zeppelin")
            #expect(try Snapshot.meta(at: original) == Corpus.meta())
        }
    }

    @Test("Given an id in decomposed form (e + a combining accent), when a delta deletes it and upserts its composed form, then both are told apart as bytes, as SQLite and the state root do, and the delta applies")
    func canonicallyEquivalentIDsAreTwoIDs() throws {
        try withTemporaryDirectory { directory in
            let decomposed = "Cafe\u{301}.md#1", composed = "Caf\u{E9}.md#1"
            #expect(decomposed == composed && Array(decomposed.utf8) != Array(composed.utf8))  // Swift takes them for one
            func record(_ id: String) -> ChunkRecord {
                ChunkRecord(chunk: Chunk(id: id, title: "Café", content: "Coffee after the storm."), vector: unit(0.6, 0.8, 0, 0))
            }
            let before = [record(decomposed)] + Corpus.entries, after = [record(composed)] + Corpus.entries
            let next = try copy(of: Corpus.snapshot(in: directory, entries: before), in: directory)
            let newMeta = Corpus.meta(version: 2, entries: after)
            try SnapshotWriter.apply([SnapshotWriter.Edit(upserts: [record(composed)], deletes: [decomposed])], newMeta: newMeta,
                                     to: next, check: .storedHashes, ifRefused: .discarded)
            #expect(try Snapshot.verify(at: next, expectedStateRoot: newMeta.stateRoot) == newMeta)
            #expect(try Snapshot.records(at: next).map { Array($0.id.utf8) }.contains(Array(composed.utf8)))
        }
    }

    /// The FTS5 index's stored blocks (`chunks_fts_data`), to tell whether a change wrote to it.
    func ftsBlocks(_ path: String) throws -> [[UInt8]] {
        let db = try Database(path: path, mode: .readOnly(immutable: false))
        let rows = try db.prepare("SELECT block FROM chunks_fts_data ORDER BY id")
        var blocks: [[UInt8]] = []
        while try rows.step() { blocks.append(rows.blob(at: 0) ?? []) }
        return blocks
    }

    @Test func givenAnUpsertThatKeepsTitleAndContent_whenApplied_thenTheFullTextIndexIsNotRewrittenAndStillAnswers() throws {
        try withTemporaryDirectory { directory in
            let next = try copy(of: Corpus.snapshot(in: directory), in: directory)
            let blocks = try ftsBlocks(next)
            let original = Corpus.entries.first { $0.chunk.id == "lighting" }!.chunk
            var retagged = original
            retagged.scenario = "blackout"
            retagged.tags = ["power"]
            let entries = Corpus.entries.map { $0.chunk.id == "lighting" ? ChunkRecord(chunk: retagged, vector: unit(0, 0, 0.6, 0.8)) : $0 }

            try SnapshotWriter.apply(upserts: [ChunkRecord(chunk: retagged, vector: unit(0, 0, 0.6, 0.8))], deletes: [],
                                     newMeta: Corpus.meta(version: 2, entries: entries), to: next)

            #expect(try ftsBlocks(next) == blocks)
            // Structure, FTS integrity against the rows, every hash and the state root.
            #expect(try Snapshot.verify(at: next, expectedStateRoot: Corpus.meta(version: 2, entries: entries).stateRoot).version == 2)
            let index = try SearchIndex(path: next)
            #expect(try index.chunk(id: "lighting") == retagged)
            let found = try index.search(SearchRequest(query: "candles", k: 10, mode: .lexical), queryVector: nil)
            #expect(found.results.map(\.chunk.id) == ["lighting"])

            // A changed content does rewrite it (the comparison above can fail).
            var edited = retagged
            edited.content += " Lanterns too."
            let third = entries.map { $0.chunk.id == "lighting" ? ChunkRecord(chunk: edited, vector: $0.vector) : $0 }
            try SnapshotWriter.apply(upserts: [ChunkRecord(chunk: edited, vector: unit(0, 0, 0.6, 0.8))], deletes: [],
                                     newMeta: Corpus.meta(version: 3, entries: third), to: next)
            #expect(try ftsBlocks(next) != blocks)
            #expect(try Snapshot.verify(at: next, expectedStateRoot: Corpus.meta(version: 3, entries: third).stateRoot).version == 3)
        }
    }

    /// FTS5 writes its pending terms out as a segment of their own whenever a row's rowid is
    /// below the last one it was given. The segments are counted by their ids in the rowids of
    /// `chunks_fts_data` (a segment's pages are keyed segment id << 37 + page), with FTS5's
    /// merging turned off in the file so that none is merged away.
    @Test func givenNewIDsBetweenChangedOnes_whenApplied_thenEachEditAddsOneFullTextSegmentAndSearchIsRight() throws {
        try withTemporaryDirectory { directory in
            func row(_ number: Int, _ text: String) -> ChunkRecord {
                ChunkRecord(chunk: Chunk(id: String(format: "row-%02d", number), title: "Row \(number)", content: "\(text) w\(number)"),
                            vector: unit(Float(number % 5) + 1, 1, 0, 0.5))
            }
            let even = stride(from: 0, to: 40, by: 2).map { row($0, "before") }
            let next = try copy(of: Corpus.snapshot(in: directory, entries: even), in: directory)
            func segments() throws -> Int {
                let db = try Database(path: next, mode: .readOnly(immutable: false))
                let count = try db.prepare("SELECT count(DISTINCT id >> 37) FROM chunks_fts_data WHERE id >= 1 << 37")
                _ = try count.step()
                return Int(count.int64(at: 0))
            }
            do {
                let db = try Database(path: next, mode: .readWrite)
                try db.exec("""
                    INSERT INTO chunks_fts(chunks_fts, rank) VALUES('automerge', 0);
                    INSERT INTO chunks_fts(chunks_fts, rank) VALUES('crisismerge', 1999)
                    """)
            }
            let before = try segments()
            // In id order, as a publisher writes a delta: every new odd row comes between two
            // changed even ones, and the first edit deletes two rows, the second re-adds one.
            let first = SnapshotWriter.Edit(upserts: (1..<38).map { row($0, $0 % 2 == 0 ? "changed" : "added") },
                                            deletes: ["row-38", "row-00"].sorted())
            let second = SnapshotWriter.Edit(upserts: [row(0, "back")] + (1..<10).map { row($0, "again") }, deletes: [])
            var result = (1..<38).map { row($0, $0 % 2 == 0 ? "changed" : "added") }
            result.replaceSubrange(0..<9, with: (1..<10).map { row($0, "again") })
            result.insert(row(0, "back"), at: 0)

            try SnapshotWriter.apply([first, second], newMeta: Corpus.meta(version: 3, entries: result), to: next,
                                     check: .storedHashes, ifRefused: .discarded)

            #expect(try segments() - before == 2)
            let index = try SearchIndex(path: next)
            func found(_ query: String) throws -> Set<String> {
                Set(try index.search(SearchRequest(query: query, k: 50, mode: .lexical), queryVector: nil).results.map(\.chunk.id))
            }
            #expect(try found("before").isEmpty)
            #expect(try found("changed") == Set(stride(from: 10, to: 38, by: 2).map { String(format: "row-%02d", $0) }))
            #expect(try found("added") == Set(stride(from: 11, to: 38, by: 2).map { String(format: "row-%02d", $0) }))
            #expect(try found("again") == Set((1..<10).map { String(format: "row-%02d", $0) }))
            #expect(try found("back") == ["row-00"])
        }
    }

    /// An upsert of a chunk that is there rewrites its row and leaves its entry in the id index
    /// alone: at a million rows the entry's page was a sixth of an in-place delta's page writes.
    /// Told from the statement's program (a deleted and re-inserted entry leaves the page's bytes
    /// as they were), then the upserts applied and found by id.
    @Test func givenUpsertsOfChunksThatAreThere_whenApplied_thenNoIdIndexEntryIsRewrittenAndEachIsFoundByID() throws {
        try withTemporaryDirectory { directory in
            let next = try copy(of: Corpus.snapshot(in: directory), in: directory)
            let db = try Database(path: next, mode: .readOnly(immutable: false))
            let program = try db.prepare("EXPLAIN " + SnapshotWriter.updateSQL)
            var opcodes: [String] = []
            while try program.step() { opcodes.append(program.string(at: 1) ?? "") }
            #expect(opcodes.contains("Insert"), "the program rewrites the row")
            #expect(!opcodes.contains("IdxInsert") && !opcodes.contains("IdxDelete"), "\(opcodes)")

            let upserts = Corpus.entries.map { entry in
                var chunk = entry.chunk
                chunk.content += " Checked again."
                return ChunkRecord(chunk: chunk, vector: entry.vector)
            }
            try SnapshotWriter.apply([SnapshotWriter.Edit(upserts: upserts, deletes: [])],
                                     newMeta: Corpus.meta(version: 2, entries: upserts), to: next, check: .storedHashes,
                                     ifRefused: .discarded)
            #expect(try Snapshot.verify(at: next, expectedStateRoot: Corpus.meta(version: 2, entries: upserts).stateRoot).version == 2)
            let index = try SearchIndex(path: next)
            for upsert in upserts { #expect(try index.chunk(id: upsert.chunk.id) == upsert.chunk) }
        }
    }

    @Test func givenRowsPerCall_whenADeltaIsApplied_thenOnRowsIsCalledOnceForEachThatManyRowsChanged() throws {
        try withTemporaryDirectory { directory in
            let original = try Corpus.snapshot(in: directory)
            let edit = SnapshotWriter.Edit(upserts: [ChunkRecord(chunk: changed, vector: unit(0, 0, 0.6, 0.8)),
                                                     ChunkRecord(chunk: added, vector: unit(0.6, 0.8, 0, 0))],
                                           deletes: ["quake-after"])
            for (rowsPerCall, calls) in [(1, 3), (2, 1), (4, 0)] {
                let next = (directory as NSString).appendingPathComponent("next-\(rowsPerCall).sqlite")
                try FileManager.default.copyItem(atPath: original, toPath: next)
                let counter = Counter()
                try SnapshotWriter.apply([edit], newMeta: Corpus.meta(version: 2, entries: expected), to: next, check: .storedHashes,
                                         ifRefused: .discarded, rowsPerCall: rowsPerCall, onRows: counter.add)
                #expect(counter.value == calls, "every \(rowsPerCall) of 3 rows changed")
            }
        }
    }

    @Test func givenADeleteOfAnUnknownChunk_whenApplied_thenItIsRefusedAndTheFileIsUnchanged() throws {
        try withTemporaryDirectory { directory in
            let next = try copy(of: Corpus.snapshot(in: directory), in: directory)
            let before = FileManager.default.contents(atPath: next)

            #expect {
                try SnapshotWriter.apply(upserts: [], deletes: ["no-such-chunk"], newMeta: Corpus.meta(version: 2), to: next)
            } throws: { error in (error as? IndexError)?.code == .deltaMismatch }
            #expect(FileManager.default.contents(atPath: next) == before)
        }
    }

    @Test func givenANewMetaThatTheDeltaDoesNotProduce_whenApplied_thenItRollsBack() throws {
        try withTemporaryDirectory { directory in
            let next = try copy(of: Corpus.snapshot(in: directory), in: directory)

            #expect {
                try SnapshotWriter.apply(upserts: [ChunkRecord(chunk: added, vector: unit(0.6, 0.8, 0, 0))], deletes: [],
                                         newMeta: Corpus.meta(version: 2), to: next)
            } throws: { error in (error as? IndexError)?.code == .stateRootMismatch }
            #expect(try Snapshot.verify(at: next) == Corpus.meta())
            let index = try SearchIndex(path: next)
            #expect(try index.search(SearchRequest(query: "zeppelin", mode: .lexical), queryVector: nil).results.isEmpty)
        }
    }

    @Test func givenNoJournal_whenTheResultIsRefused_thenTheRefusalIsStillSaid() throws {
        try withTemporaryDirectory { directory in
            let next = try copy(of: Corpus.snapshot(in: directory), in: directory)
            let edit = SnapshotWriter.Edit(upserts: [ChunkRecord(chunk: added, vector: unit(0.6, 0.8, 0, 0))], deletes: [])

            #expect {
                try SnapshotWriter.apply([edit], newMeta: Corpus.meta(version: 2), to: next, check: .storedHashes, ifRefused: .discarded)
            } throws: { error in (error as? IndexError)?.code == .stateRootMismatch }
        }
    }

    @Test func givenOneIDUpsertedAndDeleted_whenApplied_thenItIsRefused() throws {
        try withTemporaryDirectory { directory in
            let next = try copy(of: Corpus.snapshot(in: directory), in: directory)

            #expect {
                try SnapshotWriter.apply(upserts: [ChunkRecord(chunk: changed, vector: unit(0, 0, 0.6, 0.8))], deletes: ["lighting"],
                                         newMeta: Corpus.meta(version: 2), to: next)
            } throws: { error in (error as? IndexError)?.code == .deltaMismatch }
        }
    }
}

/// `SnapshotWriter.prefetch`: the rows a delta names are read into the page cache before the
/// transaction looks them up one after another. Observed with mincore(2) on the real file.
@Suite struct PrefetchTests {
    @Test("Given a snapshot dropped from the page cache, when the rows of an edit are prefetched, then their pages are cached and the file is unchanged")
    func prefetchedRowsAreCached() throws {
        try withTemporaryDirectory { directory in
            // 2,000 rows of about 3 kB: a file of a few thousand pages, each row on its own.
            let entries = Corpus.pageRows(2_000)
            let path = try Corpus.snapshot(in: directory, entries: entries)
            let before = try Data(contentsOf: URL(fileURLWithPath: path))
            try #require(PageCache.drop(path))
            let cold = try #require(PageCache.residentPages(path))
            let edit = SnapshotWriter.Edit(upserts: [], deletes: stride(from: 0, to: 2_000, by: 10).map { entries[$0].chunk.id })

            SnapshotWriter.prefetch([edit], in: path)

            let warm = try #require(PageCache.residentPages(path))
            // Each of the 200 rows holds a page of its own (and the id index's leaves), and
            // nothing but the prefetch read the file since it left the cache.
            #expect(warm.count - cold.count >= 200, "\(cold.count) pages cached before, \(warm.count) after")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        }
    }

    @Test("Given a snapshot dropped from the page cache, when an edit that removes rows and rewrites others is prefetched, then the leaves beside each removed row are cached and those beside a rewritten row are not")
    func prefetchReadsTheLeavesBesideARemovedRow() throws {
        try withTemporaryDirectory { directory in
            // Rows of about 3 kB, a leaf of `chunks` each: removing one empties its leaf, and
            // SQLite balances it with the leaves on either side, which the apply then reads.
            let entries = Corpus.pageRows(600)
            let path = try Corpus.snapshot(in: directory, entries: entries)
            let leaf = try Self.leafPages(of: path)
            let removed = stride(from: 10, to: 600, by: 40).map { entries[$0].chunk.id }
            let rewritten = stride(from: 30, to: 600, by: 40).map { entries[$0] }
            let besides = { (ids: [String]) throws -> Set<Int> in
                let rowids = try Self.rowids(of: ids, in: path)
                return Set(rowids.flatMap { [leaf[$0 - 1], leaf[$0 + 1]] }.compactMap { $0 })
                    .subtracting(rowids.compactMap { leaf[$0] })
            }
            let besideRemoved = try besides(removed), besideRewritten = try besides(rewritten.map(\.chunk.id))
            try #require(besideRemoved.count >= 2 * removed.count - 2 && besideRewritten.count >= 2 * rewritten.count - 2)
            try #require(PageCache.drop(path))
            let edit = SnapshotWriter.Edit(upserts: rewritten, deletes: removed)

            SnapshotWriter.prefetch([edit], in: path)

            let warm = try #require(PageCache.residentPages(path))
            let missing = besideRemoved.subtracting(warm), extra = besideRewritten.intersection(warm)
            #expect(missing.isEmpty, "\(missing.count) of \(besideRemoved.count) leaves beside removed rows not cached")
            // Read ahead only where the apply needs them: a rewritten row keeps its leaf.
            #expect(extra.isEmpty, "\(extra.count) leaves beside rewritten rows cached")
        }
    }

    /// The page (0-based, as mincore counts) of the leaf of `chunks` that holds each rowid:
    /// the table's leaves in key order (dbstat's paths) and their cells counted off against the
    /// rowids in order.
    private static func leafPages(of path: String) throws -> [Int64: Int] {
        let db = try Database(path: path, mode: .readOnly(immutable: true))
        let leaves = try db.prepare("SELECT pageno, ncell FROM dbstat WHERE name = 'chunks' AND pagetype = 'leaf' ORDER BY path")
        let rows = try db.prepare("SELECT rowid FROM chunks ORDER BY rowid")
        var map: [Int64: Int] = [:]
        while try leaves.step() {
            for _ in 0..<leaves.int(at: 1) {
                guard try rows.step() else { break }
                map[rows.int64(at: 0)] = leaves.int(at: 0) - 1
            }
        }
        return map
    }

    private static func rowids(of ids: [String], in path: String) throws -> [Int64] {
        let db = try Database(path: path, mode: .readOnly(immutable: true))
        let find = try db.prepare(SnapshotWriter.FullTextSQL.locate)
        return try ids.map { id in
            find.reset()
            try find.bind(id, at: 1)
            try #require(try find.step())
            return find.int64(at: 0)
        }
    }

    @Test("Given a file dropped from the page cache and then read whole, when its cached share is probed, then it is near 0 before the read and near 1 after")
    func cachedShareFollowsThePageCache() throws {
        try withTemporaryDirectory { directory in
            let path = (directory as NSString).appendingPathComponent("pages")
            try Data(repeating: 7, count: 8 << 20).write(to: URL(fileURLWithPath: path))
            try #require(PageCache.drop(path))
            #expect(SnapshotWriter.cachedShare(of: path) < 0.1)
            _ = try Data(contentsOf: URL(fileURLWithPath: path))
            #expect(SnapshotWriter.cachedShare(of: path) > 0.9)
        }
    }
}

/// Counts calls (from the applying thread only).
private final class Counter {
    private(set) var value = 0
    func add() { value += 1 }
}
