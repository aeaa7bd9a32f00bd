import CairnCore
@testable import CairnIndex
import Foundation
import Testing

/// `IndexContents.changed(deleting:upserting:)` and `CheckedDelta.contents(ofFile:meta:)`: a delta
/// checked against the installed rows in memory, and the new version's rows derived from them
/// instead of read.
@Suite struct DerivedContentsTests {
    /// Version 2 of the corpus: one chunk's text and tags changed, one deleted, one new (with a
    /// scenario the corpus does not have), one moved to no scenario.
    static let upserts: [ChunkRecord] = [
        ChunkRecord(chunk: Chunk(id: "water-purify", title: "Purifying water", content: "Boil water for three minutes at altitude.",
                                 scenario: "flood", tags: ["water"], source: "guide/water.md"), vector: unit(1, 0.1, 0, 0)),
        ChunkRecord(chunk: Chunk(id: "fire-escape", title: "Escaping a fire", content: "Stay low under the smoke and feel doors for heat.",
                                 scenario: "fire", tags: ["evacuation", "fire"]), vector: unit(0, 0.7, 0, 0.7)),
        ChunkRecord(chunk: Chunk(id: "aid-burns", title: "Treating burns", content: "Cool the burn under running water for twenty minutes.",
                                 scenario: nil, tags: ["health"]), vector: unit(0.3, 0, 0, 0.95)),
    ]
    static let deletes = ["quake-after"]

    static var version2: [ChunkRecord] {
        let replaced = Set(upserts.map(\.chunk.id))
        return Corpus.entries.filter { !replaced.contains($0.chunk.id) && !deletes.contains($0.chunk.id) } + upserts
    }

    static let requests = ScanTests.requests + [
        SearchRequest(query: "fire smoke", k: 10, mode: .hybrid, scenario: "fire"),
        SearchRequest(query: "water", k: 10, mode: .rrf, tags: ["water"]),
        SearchRequest(query: "burn", k: 10, mode: .lexical, tags: ["health"]),
    ]

    @Test(arguments: [Snapshot.RowCheck.storedHashes, .recomputedHashes])
    func givenADeltaAppliedToAFile_whenItsRowsAreDerivedFromTheOldOnes_thenTheyAnswerAsTheRowsReadFromTheFile(check: Snapshot.RowCheck) throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            let old = try Snapshot.scan(at: path, check: check, expectedStateRoot: Corpus.meta().stateRoot)
            #expect(old.hasLeaves)
            let meta = Corpus.meta(version: 2, entries: Self.version2)

            let checked = try old.changed(deleting: Self.deletes, upserting: Self.upserts)
            #expect(checked.stateRoot == meta.stateRoot && checked.count == Self.version2.count)

            try SnapshotWriter.apply([SnapshotWriter.Edit(upserts: Self.upserts, deletes: Self.deletes)], newMeta: meta,
                                     to: path, check: .checkedByCaller)
            let derived = try checked.contents(ofFile: path, meta: meta)
            let read = try Snapshot.scan(at: path, check: .recomputedHashes, expectedStateRoot: meta.stateRoot)
            #expect(derived.meta == read.meta && derived.count == read.count && derived.hasLeaves)

            let a = try SearchIndex(path: path, contents: derived), b = try SearchIndex(path: path, contents: read)
            for request in Self.requests {
                let vector = unit(0.2, 0.5, 0.1, 0.8)
                let fromDerived = try a.search(request, queryVector: vector).results
                #expect(!fromDerived.isEmpty)
                #expect(fromDerived == (try b.search(request, queryVector: vector).results))
            }
            // The derived leaves are the file's: the next delta checks against them.
            let next = [ChunkRecord(chunk: Chunk(id: "lighting", title: "Lighting", content: "Use torches.", scenario: nil, tags: []), vector: unit(0, 0, 1, 1))]
            #expect(try derived.changed(deleting: [], upserting: next).stateRoot == read.changed(deleting: [], upserting: next).stateRoot)
        }
    }

    @Test func givenADeltaThatDoesNotFitTheRows_whenChecked_thenItIsRefusedBeforeAnyFileIsTouched() throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            let old = try Snapshot.scan(at: path, check: .storedHashes)
            #expect { try old.changed(deleting: ["no-such-chunk"], upserting: []) } throws: {
                ($0 as? IndexError)?.code == .deltaMismatch
            }
            #expect { try old.changed(deleting: ["aid-burns"], upserting: [Self.upserts[2]]) } throws: {
                ($0 as? IndexError)?.code == .deltaMismatch
            }
            #expect { try old.changed(deleting: [], upserting: [ChunkRecord(chunk: Self.upserts[0].chunk, vector: [1, 0])]) } throws: {
                ($0 as? IndexError)?.code == .dimensionMismatch
            }
            // A changed upsert gives another root than the version's: the caller refuses it.
            var tampered = Self.upserts
            tampered[0].chunk.content = "Drink the flood water."
            #expect(try old.changed(deleting: Self.deletes, upserting: tampered).stateRoot
                    != Corpus.meta(version: 2, entries: Self.version2).stateRoot)
            // Rows loaded without leaves cannot check a delta.
            let bare = try Snapshot.scan(at: path, check: .none)
            #expect(!bare.hasLeaves)
            #expect { try bare.changed(deleting: [], upserting: []) } throws: { ($0 as? IndexError)?.code == .snapshotMalformed }
        }
    }

    @Test func givenAFileThatDoesNotHoldTheDeltasResult_whenRowsAreDerived_thenItIsRefused() throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            let old = try Snapshot.scan(at: path, check: .storedHashes)
            let meta = Corpus.meta(version: 2, entries: Self.version2)
            // The meta says version 2 but the rows were never changed.
            try Database(path: path, mode: .readWrite).exec(
                "UPDATE meta SET value = '2' WHERE key = 'version'; UPDATE meta SET value = '\(meta.stateRoot.hex)' WHERE key = 'state_root'")
            let checked = try old.changed(deleting: Self.deletes, upserting: Self.upserts)
            #expect { try checked.contents(ofFile: path, meta: meta) } throws: {
                ($0 as? IndexError)?.code == .snapshotMalformed
            }
        }
    }

    /// Everything a `SearchIndex` and the next delta take from the rows, by rowid.
    static func expectSameRows(_ derived: IndexContents, _ read: IndexContents) {
        let (a, b) = (derived.rows, read.rows)
        #expect(a.ids == b.ids && a.rowids == b.rowids && a.leaves == b.leaves && a.tags == b.tags && a.codes == b.codes && a.scales == b.scales)
        #expect(a.rowForRowid == b.rowForRowid)
        func scenarios(_ rows: IndexContents.Rows) -> [String?] {
            let names = Dictionary(uniqueKeysWithValues: rows.scenarioCode.map { ($1, $0) })
            return rows.scenarioCodes.map { names[$0] }
        }
        #expect(scenarios(a) == scenarios(b))
        #expect(a.idOrder == b.idOrder)
        #expect(a.rowids.map { derived.lengths.tokens(rowid: $0) } == b.rowids.map { read.lengths.tokens(rowid: $0) })
    }

    @Test func givenThreeDeltasInARow_whenEachVersionsRowsAreDerivedFromTheLast_thenTheyEqualTheRowsReadFromTheFile() throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            var contents = try Snapshot.scan(at: path, check: .recomputedHashes, expectedStateRoot: Corpus.meta().stateRoot)
            var entries = Corpus.entries
            // Each version: one chunk revised, one deleted, two new ones whose ids sort before and
            // among the others (inserted at the end of rowid order, so ids stop ascending by rowid).
            for version in 2...4 {
                let revised = entries[version]
                let upserts: [ChunkRecord] = [
                    ChunkRecord(chunk: Chunk(id: revised.chunk.id, title: revised.chunk.title, content: revised.chunk.content + " Revised \(version).",
                                             scenario: version == 3 ? nil : "storm", tags: ["revised", "v\(version)"]), vector: unit(1, Float(version), 0, 0)),
                    ChunkRecord(chunk: Chunk(id: "aaa-\(version)", title: "First \(version)", content: "early guide \(version) water", scenario: "flood",
                                             tags: []), vector: unit(0, 1, Float(version), 0)),
                    ChunkRecord(chunk: Chunk(id: "m-\(version)", title: "Middle \(version)", content: "middle guide \(version) shelter", scenario: nil,
                                             tags: ["m"]), vector: unit(0, 0, 1, Float(version))),
                ]
                let deleted = entries[entries.count - version].chunk.id
                entries.removeAll { $0.chunk.id == deleted || $0.chunk.id == revised.chunk.id }
                entries += upserts
                let meta = Corpus.meta(version: version, entries: entries)

                let checked = try contents.changed(deleting: [deleted], upserting: upserts)
                #expect(checked.stateRoot == meta.stateRoot && checked.count == entries.count)
                try SnapshotWriter.apply([SnapshotWriter.Edit(upserts: upserts, deletes: [deleted])], newMeta: meta,
                                         to: path, check: .checkedByCaller)
                let derived = try checked.contents(ofFile: path, meta: meta)
                let read = try Snapshot.scan(at: path, check: .storedHashes)
                #expect(read.rows.ids != read.rows.idOrder.map { read.rows.ids[Int($0)] })
                Self.expectSameRows(derived, read)
                contents = derived
            }
        }
    }

    @Test func givenTheDeltaAppliedToAFileWithAnotherRowidOrder_whenRowsAreDerived_thenTheyFollowThatFile() throws {
        try withTemporaryDirectory { directory in
            // The base rows come from a file whose rowids are not in id order (a new id appended)…
            let path = try Corpus.snapshot(in: directory)
            let extra = ChunkRecord(chunk: Chunk(id: "aaa-first", title: "First", content: "first aid kit", scenario: nil, tags: []), vector: unit(1, 1, 0, 0))
            let v2 = Corpus.entries + [extra]
            try SnapshotWriter.apply([SnapshotWriter.Edit(upserts: [extra], deletes: [])], newMeta: Corpus.meta(version: 2, entries: v2),
                                     to: path, check: .checkedByCaller)
            let base = try Snapshot.scan(at: path, check: .storedHashes)
            // …and the delta is applied to a file holding the same rows written whole (id order).
            let other = try Corpus.snapshot(in: directory, name: "other.sqlite", entries: v2)
            try Database(path: other, mode: .readWrite).exec("UPDATE meta SET value = '2' WHERE key = 'version'")
            let meta = Corpus.meta(version: 3, entries: v2.filter { !Self.deletes.contains($0.chunk.id) && !Self.upserts.map(\.chunk.id).contains($0.chunk.id) } + Self.upserts)
            let checked = try base.changed(deleting: Self.deletes, upserting: Self.upserts)
            #expect(checked.stateRoot == meta.stateRoot)
            let expected = checked.expectedRows()
            try SnapshotWriter.apply([SnapshotWriter.Edit(upserts: Self.upserts, deletes: Self.deletes)], newMeta: meta,
                                     to: other, check: .checkedByCaller)

            let derived = try checked.contents(ofFile: other, meta: meta, expected: expected)
            let read = try Snapshot.scan(at: other, check: .storedHashes)
            #expect(read.rows.ids.first == "aaa-first")
            Self.expectSameRows(derived, read)
        }
    }
}
