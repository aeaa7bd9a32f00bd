import CairnCore

/// Reading and verifying snapshot files.
public enum Snapshot {
    /// The snapshot's meta table.
    public static func meta(at path: String) throws(IndexError) -> SnapshotMeta {
        try meta(in: Database(path: path, mode: .readOnly(immutable: false)))
    }

    /// The state-root records of every chunk, each recomputed from the stored text, metadata and
    /// vector. Throws `.hashMismatch` when a stored hash disagrees with its recomputation, and
    /// `.dimensionMismatch` when a vector's length differs from the meta's dimension.
    public static func records(at path: String) throws(IndexError) -> [StateRoot.Record] {
        let db = try Database(path: path, mode: .readOnly(immutable: false))
        return try verifiedRecords(in: db, dimension: meta(in: db).dimension)
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
        let db = try Database(path: path, mode: .readWrite)
        let quick = try db.prepare("PRAGMA quick_check")
        guard try quick.step(), quick.string(at: 0) == "ok" else {
            throw IndexError(.snapshotMalformed, "the snapshot fails SQLite's quick check; it is corrupt")
        }
        do {
            try db.exec("INSERT INTO chunks_fts(chunks_fts, rank) VALUES('integrity-check', 1)")
        } catch {
            throw IndexError(.snapshotMalformed, "the snapshot's full-text index does not match its chunks", cause: error)
        }
        let meta = try meta(in: db)
        let records = try verifiedRecords(in: db, dimension: meta.dimension)
        let root = StateRoot.compute(records)
        guard records.count == meta.chunkCount, root == meta.stateRoot else {
            throw IndexError(.stateRootMismatch, "the snapshot's recomputed state root or chunk count differs from its meta")
        }
        if let expectedStateRoot, expectedStateRoot != root {
            throw IndexError(.stateRootMismatch, "the snapshot's state root differs from the expected one")
        }
        return meta
    }

    // MARK: Internals shared with the writer and the search index

    static func meta(in db: Database) throws(IndexError) -> SnapshotMeta {
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

    /// Records from the stored hash columns, trusted as they are (for a file this process just wrote).
    static func storedRecords(in db: Database) throws(IndexError) -> [StateRoot.Record] {
        let statement = try db.prepare("SELECT id, content_hash, metadata_hash, embedding_hash FROM chunks")
        var records: [StateRoot.Record] = []
        while try statement.step() {
            guard let content = statement.string(at: 1).flatMap(ContentID.init(hex:)),
                  let metadata = statement.string(at: 2).flatMap(ContentID.init(hex:)),
                  let embedding = statement.string(at: 3).flatMap(ContentID.init(hex:)) else {
                throw IndexError(.hashMismatch, "a chunk's stored hash is not a SHA-256 hex digest")
            }
            records.append(StateRoot.Record(id: statement.string(at: 0) ?? "", contentHash: content,
                                            metadataHash: metadata, embeddingHash: embedding))
        }
        return records
    }

    /// Records recomputed from the data, each checked against the stored hashes.
    static func verifiedRecords(in db: Database, dimension: Int) throws(IndexError) -> [StateRoot.Record] {
        let statement = try db.prepare("""
            SELECT \(SnapshotSchema.chunkColumns), content_hash, metadata_hash, embedding, embedding_hash
            FROM chunks ORDER BY rowid
            """)
        var records: [StateRoot.Record] = []
        while try statement.step() {
            let chunk = try ChunkRow.chunk(from: statement)
            guard let bytes = statement.blob(at: 8), bytes.count == dimension * 4 else {
                throw IndexError(.dimensionMismatch, "a stored vector does not have the snapshot's dimension")
            }
            let record = StateRoot.Record(chunk: chunk, embedding: ChunkRow.decode(bytes))
            guard statement.string(at: 6) == record.contentHash.hex,
                  statement.string(at: 7) == record.metadataHash.hex,
                  statement.string(at: 9) == record.embeddingHash.hex else {
                throw IndexError(.hashMismatch, "a chunk's stored hashes do not match its stored data; the snapshot was altered")
            }
            records.append(record)
        }
        return records
    }
}
