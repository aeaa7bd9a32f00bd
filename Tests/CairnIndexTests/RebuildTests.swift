import CairnCore
import CairnIndex
import Foundation
import Testing

/// protocol/snapshot.md, "Reproducible bytes": what `cairn export` relies on to hand on the
/// signed snapshot blob of a version it installed by a delta.
@Suite struct RebuildTests {
    @Test func givenTheSameRowsInAnotherOrder_whenCreated_thenTheFilesAreByteIdentical() throws {
        try withTemporaryDirectory { directory in
            let forward = try Corpus.snapshot(in: directory, name: "forward.sqlite")
            let backward = try Corpus.snapshot(in: directory, name: "backward.sqlite", entries: Corpus.entries.reversed())
            #expect(FileManager.default.contents(atPath: forward) == FileManager.default.contents(atPath: backward))
        }
    }

    @Test func givenAVersionReachedByADelta_whenRebuilt_thenItIsByteIdenticalToTheSnapshotCreatedForIt() throws {
        try withTemporaryDirectory { directory in
            // Given version 2 made two ways: created whole, and by a delta applied to version 1
            // (which gives the new chunk a rowid after all the old ones).
            let added = Chunk(id: "aaa-first", title: "Signal mirror", content: "Flash sunlight at rescuers.", scenario: "general")
            let version2 = Array(Corpus.entries.dropFirst()) + [ChunkRecord(chunk: added, vector: unit(0.5, 0.5, 0.5, 0.5))]
            let meta2 = Corpus.meta(version: 2, entries: version2)
            let created = directory + "/created.sqlite"
            try SnapshotWriter.create(at: created, meta: meta2, entries: version2)
            let applied = directory + "/applied.sqlite"
            try FileManager.default.copyItem(atPath: try Corpus.snapshot(in: directory), toPath: applied)
            try SnapshotWriter.apply(upserts: [ChunkRecord(chunk: added, vector: unit(0.5, 0.5, 0.5, 0.5))], deletes: [Corpus.entries[0].chunk.id],
                                     newMeta: meta2, to: applied)
            #expect(FileManager.default.contents(atPath: applied) != FileManager.default.contents(atPath: created))

            // When the delta-applied file is rebuilt, then it has the created file's bytes.
            let rebuilt = directory + "/rebuilt.sqlite"
            try SnapshotWriter.rebuild(from: applied, to: rebuilt)
            #expect(FileManager.default.contents(atPath: rebuilt) == FileManager.default.contents(atPath: created))
            #expect(try Snapshot.verify(at: rebuilt, expectedStateRoot: meta2.stateRoot) == meta2)
        }
    }
}
