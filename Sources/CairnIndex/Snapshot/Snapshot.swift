public import CairnCore
import CSQLite

/// Reading and verifying snapshot files.
public enum Snapshot {
    /// The snapshot's meta table.
    public static func meta(at path: String) throws(IndexError) -> SnapshotMeta {
        try meta(in: Database(path: path, mode: .readOnly(immutable: false)))
    }

    /// The state-root records of every chunk, each recomputed from the stored text, metadata and
    /// vector. Throws `.hashMismatch` when a stored hash disagrees with its recomputation, and
    /// `.dimensionMismatch` when a vector's length differs from the meta's dimension.
    ///
    /// A second, plain implementation of what `scan` checks per row (through `Chunk` and
    /// `StateRoot.Record`), which tests hold the scan's state root against.
    public static func records(at path: String) throws(IndexError) -> [StateRoot.Record] {
        let db = try Database(path: path, mode: .readOnly(immutable: false))
        let dimension = try meta(in: db).dimension
        let statement = try db.prepare("SELECT id, title, content, scenario, tags, source, embedding, "
            + "content_hash, metadata_hash, embedding_hash FROM chunks ORDER BY rowid")
        var records: [StateRoot.Record] = []
        while try statement.step() {
            let chunk = try ChunkRow.chunk(from: statement)
            guard let embedding = statement.blob(at: 6), embedding.count == dimension * 4 else {
                throw IndexError(.dimensionMismatch, "a stored vector does not have the snapshot's dimension")
            }
            let record = StateRoot.Record(id: chunk.id, contentHash: chunk.contentHash, metadataHash: chunk.metadataHash,
                                          embeddingHash: ContentID(hashing: embedding))
            guard try storedRecord(id: chunk.id, from: statement, first: 7) == record else {
                throw IndexError(.hashMismatch, "a chunk's stored hashes do not match its stored data; the snapshot was altered")
            }
            records.append(record)
        }
        return records
    }

    /// Everything a device checks before it serves a file: SQLite's quick check, the FTS index
    /// against the chunk rows, every stored hash against its data, and the recomputed chunk count
    /// and state root against the meta (and against `expectedStateRoot`, the signed manifest's
    /// value, when given). Returns the meta.
    ///
    /// The file is opened read-write because FTS5's integrity check runs as a write statement;
    /// it changes no bytes (verify a staged copy, never a file that is being served).
    @discardableResult
    public static func verify(at path: String, expectedStateRoot: ContentID? = nil) throws(IndexError) -> SnapshotMeta {
        try verifyStructure(at: path)
        return try verifyRows(at: path, expectedStateRoot: expectedStateRoot)
    }

    /// The first half of `verify`: SQLite's quick check and the FTS index against the chunk rows.
    /// May run beside `verifyRows` on the same file (each opens its own connection).
    public static func verifyStructure(at path: String) throws(IndexError) {
        let db = try Database(path: path, mode: .readWrite)
        try quickCheck(db)
        do {
            try db.exec("INSERT INTO chunks_fts(chunks_fts, rank) VALUES('integrity-check', 1)")
        } catch where Self.checkCannotRun(error) {
            // The check could not run (it is a write statement: a read-only file system, a full
            // disk, a lock): that says nothing of the file's bytes, and is not called damage.
            throw IndexError(error.code == .diskFull ? .diskFull : .io, "the full-text index's check cannot run: \(error.message)",
                             sqliteCode: error.sqliteCode, cause: error)
        } catch {
            // A mismatch (SQLITE_CORRUPT_VTAB), a damaged %_config row, a bad sector's read error.
            throw IndexError(.snapshotMalformed, "the snapshot's full-text index does not match its chunks", cause: error)
        }
    }

    /// Whether FTS5's integrity check (a write statement) failed for a reason outside the file's
    /// bytes: what `IndexError.isEnvironmental` says of any version (read-only, busy or locked,
    /// out of memory, cannot open, disk full), and a failed write or fsync, which a statement
    /// that writes meets and a read does not. Any other result is the file's own.
    static func checkCannotRun(_ error: IndexError) -> Bool {
        error.isEnvironmental
            || [SQLITE_IOERR | (3 << 8), SQLITE_IOERR | (4 << 8)].contains(error.sqliteCode ?? 0)  // IOERR_WRITE, IOERR_FSYNC
    }

    /// The second half of `verify`: every stored hash against its data, and the recomputed chunk
    /// count and state root against the meta and `expectedStateRoot`. Returns the meta.
    /// One pass over the rows in id order, keeping nothing but the running state root: memory
    /// does not grow with the file (the publisher checks a million rows this way; a device checks
    /// a version before rolling back to it), and no file is written.
    @discardableResult
    public static func verifyRows(at path: String, expectedStateRoot: ContentID? = nil) throws(IndexError) -> SnapshotMeta {
        // Read, not mapped: a mapping's pages would count in the publisher's resident set.
        let db = try Database(path: path, mode: .readOnly(immutable: false))
        let meta = try meta(in: db)
        let statement = try db.prepare("SELECT id, title, content, scenario, tags, source, embedding, content_hash, metadata_hash, "
            + "embedding_hash FROM chunks ORDER BY id")
        var root = StateRoot.Accumulator(count: meta.chunkCount)
        var rows = 0
        var rowCheck = StoredRowCheck()
        let empty = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
        while try statement.step() {
            rows += 1
            guard rows <= meta.chunkCount else { break }
            let id = statement.string(at: 0) ?? ""
            let tags = try ChunkRow.decodeTags(statement.string(at: 4) ?? "[]")
            let leaf: ContentID = try statement.withBlob(at: 6) { (bytes) throws(IndexError) -> ContentID in
                guard bytes.count == meta.dimension * 4 else {
                    throw IndexError(.dimensionMismatch, "a stored vector does not have the snapshot's dimension")
                }
                return try Snapshot.leaf(rowCheck.check(
                    id: id, title: statement.unsafeUTF8(at: 1) ?? empty, content: statement.unsafeUTF8(at: 2) ?? empty,
                    scenario: statement.unsafeUTF8(at: 3), tags: tags, source: statement.unsafeUTF8(at: 5), embedding: bytes,
                    storedHashes: (statement.unsafeUTF8(at: 7), statement.unsafeUTF8(at: 8), statement.unsafeUTF8(at: 9))))
            }
            leaf.bytes.withUnsafeBytes { root.add(leaf: $0) }
        }
        guard rows == meta.chunkCount, root.finalize() == meta.stateRoot else {
            throw IndexError(.stateRootMismatch, "the snapshot's recomputed state root or chunk count differs from its meta")
        }
        if let expectedStateRoot, expectedStateRoot != meta.stateRoot {
            throw IndexError(.stateRootMismatch, "the snapshot's state root differs from the expected one")
        }
        return meta
    }

    private static func quickCheck(_ db: Database) throws(IndexError) {
        let quick = try db.prepare("PRAGMA quick_check")
        guard try quick.step(), quick.string(at: 0) == "ok" else {
            throw IndexError(.snapshotMalformed, "the snapshot fails SQLite's quick check; it is corrupt")
        }
    }

    /// Whether the snapshot at `path` still holds the rows `expected` names: its meta equals it,
    /// and the state root over every row's stored hashes equals its state root. A device runs it
    /// in the background after start-up, when the rows files, not the file, gave it the installed
    /// version's leaves.
    public static func storedRowsMatch(at path: String, meta expected: SnapshotMeta) -> Bool {
        guard let db = try? Database(path: path, mode: .readOnly(immutable: false)), (try? meta(in: db)) == expected else {
            return false
        }
        return (try? storedStateRoot(in: db, count: expected.chunkCount)) == expected.stateRoot
    }

    /// The state root over the stored hash columns of every row (id order), trusted as they
    /// are; nil when the file holds other than `count` rows. One read of every row, holding only
    /// the running root.
    static func storedStateRoot(in db: Database, count: Int) throws(IndexError) -> ContentID? {
        let statement = try db.prepare("SELECT id, content_hash, metadata_hash, embedding_hash FROM chunks ORDER BY id")
        var root = StateRoot.Accumulator(count: count)
        var rows = 0
        while try statement.step() {
            rows += 1
            guard rows <= count else { return nil }
            try storedRecord(id: statement.string(at: 0) ?? "", from: statement, first: 1).leaf.bytes.withUnsafeBytes { root.add(leaf: $0) }
        }
        return rows == count ? root.finalize() : nil
    }

    /// The leaf a row check found, or the refusal it stands for.
    static func leaf(_ outcome: StoredRowCheck.Outcome) throws(IndexError) -> ContentID {
        switch outcome {
        case .leaf(let leaf): return leaf
        case .mismatch: throw IndexError(.hashMismatch, "a chunk's stored hashes do not match its stored data; the snapshot was altered")
        case .malformedHash: throw IndexError(.hashMismatch, "a chunk's stored hash is not a SHA-256 hex digest")
        }
    }

    // MARK: Internals shared with the writer and the search index

    static func meta(in db: Database) throws(IndexError) -> SnapshotMeta {
        // The file's own marks, before its tables: another program's database, or a schema
        // revision newer than this build's (its tables may mean something else), is refused.
        func pragma(_ name: String) throws(IndexError) -> Int64 {
            let statement = try db.prepare("PRAGMA \(name)")
            return try statement.step() ? statement.int64(at: 0) : 0
        }
        let application = try pragma("application_id")
        guard application == 0 || application == Int64(SnapshotSchema.applicationID) else {
            throw IndexError(.snapshotMalformed, "the file is not a Cairn snapshot (its application_id is \(application))")
        }
        let revision = try pragma("user_version")
        guard revision <= Int64(SnapshotSchema.userVersion) else {
            throw IndexError(.snapshotMalformed, "the snapshot's schema revision \(revision) is newer than this build reads (\(SnapshotSchema.userVersion)); upgrade the software")
        }
        let statement: Statement
        do {
            statement = try db.prepare("SELECT key, value FROM meta")
        } catch {
            throw IndexError(.snapshotMalformed, "the file is not a Cairn snapshot (no meta table)", cause: error)
        }
        var rows: [String: String] = [:]
        while try statement.step() {
            if let key = statement.string(at: 0), let value = statement.string(at: 1) { rows[key] = value }
        }
        return try SnapshotMeta(rows: rows)
    }

    /// The record of `id` from the stored content, metadata and embedding hashes in columns
    /// `first`, `first + 1`, `first + 2` of the current row.
    static func storedRecord(id: String, from statement: Statement, first: Int32) throws(IndexError) -> StateRoot.Record {
        guard let content = statement.string(at: first).flatMap(ContentID.init(hex:)),
              let metadata = statement.string(at: first + 1).flatMap(ContentID.init(hex:)),
              let embedding = statement.string(at: first + 2).flatMap(ContentID.init(hex:)) else {
            throw IndexError(.hashMismatch, "a chunk's stored hash is not a SHA-256 hex digest")
        }
        return StateRoot.Record(id: id, contentHash: content, metadataHash: metadata, embeddingHash: embedding)
    }
}

extension Snapshot {
    /// A snapshot file's rows read one at a time, for a writer that merges two versions by id
    /// (the publisher's deltas): each row's id and stored hashes in id order, and any row whole by
    /// its id. Trusts the file (the caller verified it).
    public final class RowReader {
        private let db: Database
        private let ordered: Statement
        private let byID: Statement
        private let dimension: Int

        public init(path: String) throws(IndexError) {
            db = try Database(path: path, mode: .readOnly(immutable: true))
            dimension = try Snapshot.meta(in: db).dimension
            ordered = try db.prepare("SELECT id, content_hash, metadata_hash, embedding_hash FROM chunks ORDER BY id")
            byID = try db.prepare("SELECT \(SnapshotSchema.chunkColumns), embedding FROM chunks WHERE id = ?1")
        }

        /// The next row in UTF-8 order of ids: its id and its three stored hashes (hex); nil
        /// after the last.
        public func next() throws(IndexError) -> (id: String, hashes: [String])? {
            guard try ordered.step() else { return nil }
            return (ordered.string(at: 0) ?? "", (1...3).map { ordered.string(at: Int32($0)) ?? "" })
        }

        /// The row with `id`, whole, or nil.
        public func record(id: String) throws(IndexError) -> ChunkRecord? {
            byID.reset()
            try byID.bind(id, at: 1)
            guard try byID.step() else { return nil }
            guard let bytes = byID.blob(at: 6), bytes.count == dimension * 4 else {
                throw IndexError(.dimensionMismatch, "a stored vector does not have the snapshot's dimension")
            }
            return ChunkRecord(chunk: try ChunkRow.chunk(from: byID), vector: VectorBytes.decode(bytes))
        }
    }
}
