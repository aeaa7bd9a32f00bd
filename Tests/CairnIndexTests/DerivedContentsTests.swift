import CairnCore
import CairnIndex
import Foundation
import Testing

/// `IndexContents.changed(deleting:upserting:)` and `Changed.contents(ofFile:meta:)`: a delta
/// checked against the installed rows in memory, and the new version's rows derived from them
/// instead of read.
@Suite struct DerivedContentsTests {
    /// Version 2 of the corpus: one chunk's text and tags changed, one deleted, one new (with a
    /// scenario the corpus does not have), one moved to no scenario.
    static let upserts: [(Chunk, [Float])] = [
        (Chunk(id: "water-purify", title: "Purifying water", content: "Boil water for three minutes at altitude.",
               scenario: "flood", tags: ["water"], source: "guide/water.md"), unit(1, 0.1, 0, 0)),
        (Chunk(id: "fire-escape", title: "Escaping a fire", content: "Stay low under the smoke and feel doors for heat.",
               scenario: "fire", tags: ["evacuation", "fire"]), unit(0, 0.7, 0, 0.7)),
        (Chunk(id: "aid-burns", title: "Treating burns", content: "Cool the burn under running water for twenty minutes.",
               scenario: nil, tags: ["health"]), unit(0.3, 0, 0, 0.95)),
    ]
    static let deletes = ["quake-after"]

    static var version2: [(Chunk, [Float])] {
        let replaced = Set(upserts.map(\.0.id))
        return Corpus.entries.filter { !replaced.contains($0.0.id) && !deletes.contains($0.0.id) } + upserts
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

            let changed = try old.changed(deleting: Self.deletes, upserting: Self.upserts)
            #expect(changed.stateRoot == meta.stateRoot && changed.count == Self.version2.count)

            try SnapshotWriter.apply([SnapshotWriter.Change(upserts: Self.upserts, deletes: Self.deletes)], newMeta: meta,
                                     to: path, check: .checkedByCaller)
            let derived = try changed.contents(ofFile: path, meta: meta)
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
            let next = [(Chunk(id: "lighting", title: "Lighting", content: "Use torches.", scenario: nil, tags: []), unit(0, 0, 1, 1))]
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
            #expect { try old.changed(deleting: [], upserting: [(Self.upserts[0].0, [1, 0])]) } throws: {
                ($0 as? IndexError)?.code == .dimensionMismatch
            }
            // A changed upsert gives another root than the version's: the caller refuses it.
            var tampered = Self.upserts
            tampered[0].0.content = "Drink the flood water."
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
            let changed = try old.changed(deleting: Self.deletes, upserting: Self.upserts)
            #expect { try changed.contents(ofFile: path, meta: meta) } throws: {
                ($0 as? IndexError)?.code == .snapshotMalformed
            }
        }
    }
}
