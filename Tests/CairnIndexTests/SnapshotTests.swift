import CairnCore
import CairnIndex
import Foundation
import Testing

@Suite struct SnapshotTests {
    @Test func givenEntries_whenCreatingASnapshot_thenMetaAndRecordsReproduceTheStateRoot() throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)

            let meta = try Snapshot.verify(at: path)
            let records = try Snapshot.records(at: path)

            #expect(meta == Corpus.meta())
            #expect(meta.chunkCount == Corpus.entries.count)
            #expect(StateRoot.compute(records) == StateRoot.compute(Corpus.entries.map { StateRoot.Record(chunk: $0.chunk, embedding: $0.vector) }))
            #expect(!FileManager.default.fileExists(atPath: path + "-journal"))
            #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        }
    }

    @Test func givenAnExistingFile_whenCreatingASnapshotThere_thenItRefusesAndKeepsTheFile() throws {
        try withTemporaryDirectory { directory in
            let path = (directory as NSString).appendingPathComponent("taken")
            #expect(FileManager.default.createFile(atPath: path, contents: Data("keep".utf8)))

            #expect { try SnapshotWriter.create(at: path, meta: Corpus.meta(), entries: Corpus.entries) } throws: { error in
                (error as? IndexError)?.code == .fileExists
            }
            #expect(FileManager.default.contents(atPath: path) == Data("keep".utf8))
        }
    }

    @Test func givenAMetaThatDoesNotDescribeTheEntries_whenCreating_thenItRefusesAndLeavesNoFile() throws {
        try withTemporaryDirectory { directory in
            let path = (directory as NSString).appendingPathComponent("snapshot.sqlite")
            let wrong = Corpus.meta(entries: Array(Corpus.entries.dropLast()))

            #expect { try SnapshotWriter.create(at: path, meta: wrong, entries: Corpus.entries) } throws: { error in
                (error as? IndexError)?.code == .stateRootMismatch
            }
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    @Test func givenAVectorOfTheWrongDimension_whenCreating_thenItRefuses() throws {
        try withTemporaryDirectory { directory in
            let path = (directory as NSString).appendingPathComponent("snapshot.sqlite")
            let entries = [ChunkRecord(chunk: Chunk(id: "a", title: "A", content: "a"), vector: [Float](repeating: 0.5, count: 3))]

            #expect { try SnapshotWriter.create(at: path, meta: Corpus.meta(entries: entries), entries: entries) } throws: { error in
                (error as? IndexError)?.code == .dimensionMismatch
            }
        }
    }

    @Test func givenStoredEmbeddingBytesAlteredOnACopy_whenVerifying_thenTheHashCheckFails() throws {
        try withTemporaryDirectory { directory in
            let original = try Corpus.snapshot(in: directory)
            let copy = (directory as NSString).appendingPathComponent("copy.sqlite")
            try FileManager.default.copyItem(atPath: original, toPath: copy)
            try alter(copy, sql: "UPDATE chunks SET embedding = ?1 WHERE id = 'aid-burns'",
                      blob: littleEndianBytes(unit(0, 0, 0.3, 0.95)))

            #expect { try Snapshot.verify(at: copy) } throws: { error in (error as? IndexError)?.code == .hashMismatch }
            #expect { try Snapshot.records(at: copy) } throws: { error in (error as? IndexError)?.code == .hashMismatch }
            #expect(try Snapshot.verify(at: original) == Corpus.meta())
        }
    }

    @Test func givenEmbeddingAndItsStoredHashBothAltered_whenVerifying_thenTheStateRootCheckFails() throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            let vector = unit(0, 0, 0.3, 0.95)
            try alter(path, sql: "UPDATE chunks SET embedding = ?1, embedding_hash = '\(StateRoot.embeddingHash(vector).hex)' WHERE id = 'aid-burns'",
                      blob: littleEndianBytes(vector))

            #expect { try Snapshot.verify(at: path) } throws: { error in (error as? IndexError)?.code == .stateRootMismatch }
        }
    }

    @Test func givenContentChangedWithoutItsFullTextIndex_whenVerifying_thenTheIndexCheckFails() throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            let content = "Completely different words."
            let db = try Database(path: path, mode: .readWrite)
            try db.exec("UPDATE chunks SET content = '\(content)', content_hash = '\(ContentID(hashing: Array(content.utf8)).hex)' WHERE id = 'aid-burns'")

            #expect { try Snapshot.verify(at: path) } throws: { error in (error as? IndexError)?.code == .snapshotMalformed }
        }
    }

    @Test func givenAVerifiedSnapshot_whenTheExpectedStateRootDiffers_thenVerifyRefuses() throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)

            #expect { try Snapshot.verify(at: path, expectedStateRoot: ContentID(hashing: [1, 2, 3])) } throws: { error in
                (error as? IndexError)?.code == .stateRootMismatch
            }
        }
    }

    @Test func givenAFileThatIsNotASnapshot_whenReadingItsMeta_thenItIsMalformed() throws {
        try withTemporaryDirectory { directory in
            let path = (directory as NSString).appendingPathComponent("other.sqlite")
            try Database(path: path, mode: .readWriteCreate).exec("CREATE TABLE t(x)")

            #expect { try Snapshot.meta(at: path) } throws: { error in (error as? IndexError)?.code == .snapshotMalformed }
        }
    }

    @Test("Given a snapshot whose schema revision (user_version) is newer than this build's, or whose application_id is another program's, when its meta is read, then it is malformed, saying to upgrade or that it is not a snapshot; the revision this build writes reads")
    func schemaMarksChecked() throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            #expect(try Snapshot.meta(at: path).format == SnapshotMeta.currentFormat)
            try Database(path: path, mode: .readWrite).exec("PRAGMA user_version = \(SnapshotSchema.userVersion + 1)")
            #expect { try Snapshot.meta(at: path) } throws: { error in
                (error as? IndexError)?.code == .snapshotMalformed && (error as? IndexError)?.message.contains("upgrade") == true
            }
            try Database(path: path, mode: .readWrite).exec("PRAGMA user_version = \(SnapshotSchema.userVersion); PRAGMA application_id = 42")
            #expect { try Snapshot.meta(at: path) } throws: { error in
                (error as? IndexError)?.message.contains("not a Cairn snapshot (its application_id is 42)") == true
            }
        }
    }

    @Test("Given a snapshot whose meta (covered by no hash a device checks at start-up) holds a dimension or chunk count past what the rows files hold, when its meta is read, then it is malformed, naming the key, not a count that traps the size arithmetic after")
    func outOfRangeMetaIsMalformed() throws {
        try withTemporaryDirectory { directory in
            for (key, value) in [("dimension", "9999999999"), ("chunk_count", "9999999999"), ("dimension", "16385")] {
                let path = try Corpus.snapshot(in: directory, name: "\(key)-\(value).sqlite")
                try Database(path: path, mode: .readWrite).exec("UPDATE meta SET value = '\(value)' WHERE key = '\(key)'")
                #expect { try Snapshot.meta(at: path) } throws: { error in
                    (error as? IndexError)?.code == .snapshotMalformed && (error as? IndexError)?.message.contains(key) == true
                }
            }
        }
    }
}

func littleEndianBytes(_ vector: [Float]) -> [UInt8] {
    vector.flatMap { value in withUnsafeBytes(of: value.bitPattern.littleEndian, Array.init) }
}

/// Runs one UPDATE with one blob parameter on the file, as an attacker or a bad disk would.
func alter(_ path: String, sql: String, blob: [UInt8]) throws {
    let db = try Database(path: path, mode: .readWrite)
    let statement = try db.prepare(sql)
    try statement.bind(blob, at: 1)
    try statement.run()
    #expect(db.changes == 1)
}
