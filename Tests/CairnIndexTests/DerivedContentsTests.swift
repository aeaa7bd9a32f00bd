import CairnCore
@testable import CairnIndex
import Foundation
import Testing

/// `IndexContents.changed(deleting:upserting:)` and `CheckedDelta.contents(ofFile:meta:setHash:basePath:)`:
/// a delta checked against the installed version's rows files, and the new version's rows files
/// (the base linked, an overlay of the changed rows) written without reading the file's rows.
/// Each version lives in its own folder, as on a device: the delta is applied to a copy of the
/// last version's file beside it.
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

    /// A copy of the snapshot at `path` in a new folder `name` of `directory` (as a device
    /// copies the live index into the new version's folder), and its path.
    static func copy(_ path: String, to name: String, in directory: String) throws -> String {
        let folder = (directory as NSString).appendingPathComponent(name)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let copy = (folder as NSString).appendingPathComponent("index.sqlite")
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        return copy
    }

    /// A copy of the file at `path` scanned in a folder of its own (so that the scan's rows file
    /// does not replace the one a derived version links to).
    static func scanCopy(_ path: String, in directory: String, check: Snapshot.RowCheck = .storedHashes) throws -> IndexContents {
        try Snapshot.scan(at: try copy(path, to: "scan-\(UUID().uuidString)", in: directory), check: check)
    }

    /// Applies one delta to a copy of `contents`' file in folder `name` and derives the new rows;
    /// checked by the set hash when `setHash` (the new version's) is given, else by the state root.
    static func apply(_ upserts: [ChunkRecord], deleting deletes: [String], to contents: IndexContents, at path: String,
                      meta: SnapshotMeta, setHash: ContentID? = nil, name: String, in directory: String) throws -> (String, IndexContents?) {
        let checked = try contents.changed(deleting: deletes, upserting: ChunkRecords(upserts), bySetHash: setHash != nil)
        if setHash != nil {
            // No state root: the set hash derived from the old rows' own.
            #expect(checked.stateRoot == nil && checked.setHash != nil)
        } else {
            // The state root; and the set hash too when the old rows' was known.
            #expect(checked.stateRoot == meta.stateRoot && (checked.setHash != nil) == (contents.setHash != nil))
        }
        #expect(checked.gives(stateRoot: meta.stateRoot, setHash: setHash, count: meta.chunkCount))
        let next = try copy(path, to: name, in: directory)
        try SnapshotWriter.apply([SnapshotWriter.Edit(upserts: upserts, deletes: deletes)], newMeta: meta, to: next,
                                 check: .checkedByCaller)
        // Rows are derived only for the version the check gave: another set hash, or another
        // state root, and the caller scans the file instead.
        let base = IndexContents.basePath(beside: path), other = ContentID(hashing: Array("another version".utf8))
        var otherRoot = meta
        otherRoot.stateRoot = other
        #expect(try checked.contents(ofFile: next, meta: setHash == nil ? otherRoot : meta, setHash: setHash.map { _ in other }, basePath: base) == nil)
        return (next, try checked.contents(ofFile: next, meta: meta, setHash: setHash, basePath: base))
    }

    @Test(arguments: [Snapshot.RowCheck.storedHashes, .recomputedHashes])
    func givenADeltaAppliedToAFile_whenItsRowsAreDerivedFromTheOldOnes_thenTheyAnswerAsTheRowsReadFromTheFile(check: Snapshot.RowCheck) throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            let old = try Snapshot.scan(at: path, check: check, expectedStateRoot: Corpus.meta().stateRoot)
            let meta = Corpus.meta(version: 2, entries: Self.version2)
            let (next, derived) = try Self.apply(Self.upserts, deleting: Self.deletes, to: old, at: path, meta: meta, name: "2", in: directory)
            let rows = try #require(derived)
            // The base is the old version's file, linked, and served through the old rows' own
            // mapping of it; the changes are an overlay beside it.
            #expect(rows.overlayCount == 3 && rows.removedCount == 3 && rows.base.isFile(at: IndexContents.basePath(beside: path)))
            #expect(rows.base.isFile(at: IndexContents.basePath(beside: next)) && rows.base === old.base)
            let read = try Self.scanCopy(next, in: directory, check: .recomputedHashes)
            #expect(rows.meta == read.meta && rows.count == read.count && rows.stateRoot() == meta.stateRoot)
            Self.expectSameRows(rows, read)

            let a = try SearchIndex(path: next, contents: rows), b = try SearchIndex(path: next, contents: read)
            for request in Self.requests {
                let vector = unit(0.2, 0.5, 0.1, 0.8)
                let fromDerived = try a.search(request, queryVector: vector).results
                #expect(!fromDerived.isEmpty)
                let fromRead = try b.search(request, queryVector: vector).results
                // The same answers; fused scores to rounding (the moments sum the rows in another order).
                #expect(fromDerived.map(\.chunk) == fromRead.map(\.chunk))
                #expect(fromDerived.map(\.lexicalScore) == fromRead.map(\.lexicalScore) && fromDerived.map(\.denseScore) == fromRead.map(\.denseScore))
                for (x, y) in zip(fromDerived, fromRead) { #expect(abs(x.fusedScore - y.fusedScore) < 1e-9) }
            }
            // The derived leaves are the file's: the next delta checks against them.
            let more = [ChunkRecord(chunk: Chunk(id: "lighting", title: "Lighting", content: "Use torches.", scenario: nil, tags: []), vector: unit(0, 0, 1, 1))]
            #expect(try rows.changed(deleting: [], upserting: ChunkRecords(more)).stateRoot == read.changed(deleting: [], upserting: ChunkRecords(more)).stateRoot)
            // Reopened from the files alone, as after a restart: the same rows.
            let reopened = try #require(try IndexContents.open(beside: next, meta: meta))
            Self.expectSameRows(reopened, read)
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
            #expect(try old.changed(deleting: Self.deletes, upserting: ChunkRecords(tampered)).stateRoot
                    != Corpus.meta(version: 2, entries: Self.version2).stateRoot)
        }
    }

    @Test func givenAFileThatDoesNotHoldTheDeltasResult_whenRowsAreDerived_thenItIsRefused() throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            let old = try Snapshot.scan(at: path, check: .storedHashes)
            let meta = Corpus.meta(version: 2, entries: Self.version2)
            // The meta says version 2 but the rows were never changed.
            let next = try Self.copy(path, to: "2", in: directory)
            try Database(path: next, mode: .readWrite).exec(
                "UPDATE meta SET value = '2' WHERE key = 'version'; UPDATE meta SET value = '\(meta.stateRoot.hex)' WHERE key = 'state_root'")
            let checked = try old.changed(deleting: Self.deletes, upserting: ChunkRecords(Self.upserts))
            #expect { try checked.contents(ofFile: next, meta: meta, setHash: nil, basePath: IndexContents.basePath(beside: path)) } throws: {
                ($0 as? IndexError)?.code == .snapshotMalformed
            }
        }
    }

    /// Everything a `SearchIndex` and the next delta take from the rows, by rowid.
    static func expectSameRows(_ derived: IndexContents, _ read: IndexContents) {
        struct Row: Equatable {
            var id: String, scenario: String?, tags: [String], leaf: [UInt8], codes: [Int8], scale: Float, signs: [UInt64], length: Int32
        }
        func rows(_ contents: IndexContents) -> [Int64: Row] {
            var rows: [Int64: Row] = [:]
            let d = contents.meta.dimension, words = RowFile.Layout.signWords(d)
            for row in 0..<contents.slots where contents.isLive(row) {
                let (file, local) = row < contents.base.count ? (contents.base, row) : (contents.overlay!, row - contents.base.count)
                let scenario = contents.scenario(row)
                rows[contents.rowid(row)] = Row(
                    id: contents.id(row), scenario: scenario < 0 ? nil : contents.scenarioNames[Int(scenario)],
                    tags: contents.tags(row).sorted(), leaf: Array(contents.leaf(row)),
                    codes: Array(file.codes[local * d..<(local + 1) * d]), scale: file.scales[local],
                    signs: Array(file.signs[local * words..<(local + 1) * words]), length: contents.length(row))
            }
            return rows
        }
        let (a, b) = (rows(derived), rows(read))
        #expect(a.count == derived.count && a == b)
        var inOrder: [[String]] = [[], []]
        for (index, contents) in [derived, read].enumerated() { contents.forEachInIDOrder { inOrder[index].append(contents.id($0)) } }
        #expect(inOrder[0] == inOrder[1] && inOrder[0] == inOrder[0].sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
        for contents in [derived, read] {
            for (rowid, row) in a { #expect(contents.row(rowid: rowid).map(contents.id) == row.id) }
            // A rowid a damaged doclist gives, far below the first: no row, no overflow.
            #expect(contents.row(rowid: .min) == nil && contents.row(rowid: .max) == nil)
        }
    }

    @Test(arguments: [false, true])
    func givenThreeDeltasInARow_whenEachVersionsRowsAreDerivedFromTheLast_thenTheyEqualTheRowsReadFromTheFile(bySetHash: Bool) throws {
        try withTemporaryDirectory { directory in
            var path = try Corpus.snapshot(in: directory)
            var contents = try Snapshot.scan(at: path, check: .recomputedHashes, expectedStateRoot: Corpus.meta().stateRoot)
            var entries = Corpus.entries
            // Each version: one chunk revised, one deleted, two new ones whose ids sort before and
            // among the others (inserted at the end of rowid order, so ids stop ascending by rowid);
            // version 4 also revises a row version 3 added (an overlay row replaced).
            for version in 2...4 {
                let revised = entries[version]
                var upserts: [ChunkRecord] = [
                    ChunkRecord(chunk: Chunk(id: revised.chunk.id, title: revised.chunk.title, content: revised.chunk.content + " Revised \(version).",
                                             scenario: version == 3 ? nil : "storm", tags: ["revised", "v\(version)"]), vector: unit(1, Float(version), 0, 0)),
                    ChunkRecord(chunk: Chunk(id: "aaa-\(version)", title: "First \(version)", content: "early guide \(version) water", scenario: "flood",
                                             tags: []), vector: unit(0, 1, Float(version), 0)),
                    ChunkRecord(chunk: Chunk(id: "m-\(version)", title: "Middle \(version)", content: "middle guide \(version) shelter", scenario: nil,
                                             tags: ["m"]), vector: unit(0, 0, 1, Float(version))),
                ]
                if version == 4 {
                    upserts.append(ChunkRecord(chunk: Chunk(id: "m-3", title: "Middle again", content: "middle guide revised", scenario: "flood",
                                                            tags: ["m", "again"]), vector: unit(1, 1, 1, 1)))
                }
                let deleted = version == 4 ? "aaa-3" : entries[entries.count - version].chunk.id
                let replaced = Set(upserts.map(\.chunk.id))
                entries.removeAll { $0.chunk.id == deleted || replaced.contains($0.chunk.id) }
                entries += upserts
                let meta = Corpus.meta(version: version, entries: entries)
                let setHash = SetHash(leaves: entries.map(\.stateRecord.leaf))

                let (next, derived) = try Self.apply(upserts, deleting: [deleted], to: contents, at: path, meta: meta,
                                                     setHash: bySetHash ? setHash.digest(count: entries.count) : nil,
                                                     name: "\(version)", in: directory)
                let rows = try #require(derived)
                let read = try Self.scanCopy(next, in: directory)
                Self.expectSameRows(rows, read)
                // The scan's set hash is the records'; the one the check derived from the old
                // rows' is handed to the new rows, whichever hash the check compared.
                #expect(read.setHash == setHash)
                #expect(rows.setHash == setHash)
                #expect(rows.computeSetHash() == setHash)
                // A changed upsert gives another set hash.
                var tampered = upserts
                tampered[0].chunk.content += " Tampered."
                #expect(!(try contents.changed(deleting: [deleted], upserting: ChunkRecords(tampered), bySetHash: true)
                    .gives(stateRoot: meta.stateRoot, setHash: setHash.digest(count: entries.count), count: meta.chunkCount)))
                (path, contents) = (next, rows)
            }
            #expect(contents.overlayCount == 7)
        }
    }

    @Test func givenTheDeltaAppliedToAFileWithAnotherRowidOrder_whenRowsAreDerived_thenNoneAreAndAScanWritesThem() throws {
        try withTemporaryDirectory { directory in
            // The base rows come from a file whose rowids are not in id order (a new id appended)…
            let path = try Corpus.snapshot(in: directory)
            let extra = ChunkRecord(chunk: Chunk(id: "aaa-first", title: "First", content: "first aid kit", scenario: nil, tags: []), vector: unit(1, 1, 0, 0))
            let v2 = Corpus.entries + [extra]
            try SnapshotWriter.apply([SnapshotWriter.Edit(upserts: [extra], deletes: [])], newMeta: Corpus.meta(version: 2, entries: v2),
                                     to: path, check: .checkedByCaller)
            let base = try Snapshot.scan(at: path, check: .storedHashes)
            // …and the delta is applied to a file holding the same rows written whole (id order).
            let folder = (directory as NSString).appendingPathComponent("3")
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let other = try Corpus.snapshot(in: folder, name: "index.sqlite", entries: v2)
            try Database(path: other, mode: .readWrite).exec("UPDATE meta SET value = '2' WHERE key = 'version'")
            let meta = Corpus.meta(version: 3, entries: v2.filter { !Self.deletes.contains($0.chunk.id) && !Self.upserts.map(\.chunk.id).contains($0.chunk.id) } + Self.upserts)
            let checked = try base.changed(deleting: Self.deletes, upserting: ChunkRecords(Self.upserts))
            #expect(checked.stateRoot == meta.stateRoot)
            try SnapshotWriter.apply([SnapshotWriter.Edit(upserts: Self.upserts, deletes: Self.deletes)], newMeta: meta,
                                     to: other, check: .checkedByCaller)

            // The base's rowids are not the file's: nothing is derived, and a scan writes the rows.
            #expect(try checked.contents(ofFile: other, meta: meta, setHash: nil, basePath: IndexContents.basePath(beside: path)) == nil)
            // The overlay it began to write is gone with its writer.
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder).allSatisfy { !$0.contains("overlay") })
            let read = try Snapshot.scan(at: other, check: .storedHashes)
            #expect(read.id(0) == "aaa-first" && read.stateRoot() == meta.stateRoot)
        }
    }

    @Test func givenAnOverlayOfSeveralBatches_whenRowsAreDerived_thenTheyEqualTheRowsReadFromTheFile() throws {
        // 2,500 upserts (1,500 revised, 1,000 new): the overlay's codes are written in batches of
        // 1,024 rows, the last one partial.
        let entries = (0..<8_000).map { (index: Int) -> ChunkRecord in
            let chunk = Chunk(id: String(format: "row-%05d", index), title: "Row \(index)", content: "text \(index % 97)",
                              tags: index % 2 == 0 ? ["even"] : [])
            return ChunkRecord(chunk: chunk, vector: unit(1, Float(index % 7), Float(index % 3), 0))
        }
        let upserts = (0..<2_500).map { (index: Int) -> ChunkRecord in
            let id = String(format: index < 1_500 ? "row-%05d" : "row-%05d-new", index * 5)
            let chunk = Chunk(id: id, title: "Revised \(index)", content: "revised text \(index % 89)",
                              scenario: index % 3 == 0 ? "flood" : nil, tags: ["v2"])
            return ChunkRecord(chunk: chunk, vector: unit(Float(index % 5), 1, 0, Float(index % 11)))
        }
        #expect(upserts.count > 2 * IndexContents.CheckedDelta.batchRows && upserts.count % IndexContents.CheckedDelta.batchRows != 0)
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory, entries: entries)
            let old = try Snapshot.scan(at: path, check: .storedHashes)
            let replaced = Set(upserts.map(\.chunk.id))
            let meta = Corpus.meta(version: 2, entries: entries.filter { !replaced.contains($0.chunk.id) } + upserts)
            let (next, derived) = try Self.apply(upserts, deleting: [], to: old, at: path, meta: meta, name: "2", in: directory)
            let rows = try #require(derived)
            #expect(rows.overlayCount == 2_500)
            Self.expectSameRows(rows, try Self.scanCopy(next, in: directory))
        }
    }

    @Test func givenDeltasPastTheOverlaysShare_whenRowsAreDerived_thenNoneAreAndTheCallerScans() throws {
        // 20,000 rows: an overlay may hold a quarter of them (5,000 changed or removed).
        let entries = (0..<20_000).map { index in
            ChunkRecord(chunk: Chunk(id: String(format: "row-%05d", index), title: "Row \(index)", content: "text \(index % 97)"),
                        vector: unit(1, Float(index % 7), Float(index % 3), 0))
        }
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory, entries: entries)
            let old = try Snapshot.scan(at: path, check: .storedHashes)
            for (version, deleted) in [(2, 5_000), (3, 5_001)] {
                let deletes = entries.prefix(deleted).map(\.chunk.id)
                let meta = Corpus.meta(version: version, entries: Array(entries.dropFirst(deleted)))
                let (next, derived) = try Self.apply([], deleting: deletes, to: old, at: path, meta: meta, name: "\(version)", in: directory)
                if deleted <= 5_000 {
                    #expect(try #require(derived).removedCount == deleted)
                } else {
                    #expect(derived == nil)
                    #expect(try Snapshot.scan(at: next, check: .storedHashes).count == 20_000 - deleted)
                }
            }
        }
    }
}
