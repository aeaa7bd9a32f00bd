import CairnCore

extension Snapshot {
    /// What a scan checks while it loads the rows.
    public enum RowCheck: Sendable {
        /// Nothing: an installed file, verified when it was installed, opened to serve.
        case none
        /// The state root over the stored hash columns: a delta applied to a copy of a verified
        /// base (protocol/snapshot.md, "Verification after a delta").
        case storedHashes
        /// Every row's three hashes recomputed from its data and compared with the stored ones,
        /// then the state root over them: a full snapshot (protocol/snapshot.md, "Verification").
        case recomputedHashes
    }

    /// One pass over every row in rowid order that loads what a `SearchIndex` keeps in memory
    /// and, unless `check` is `.none`, computes the state root as `check` says and compares it
    /// and the row count with the meta's and with `expectedStateRoot` (the signed manifest's).
    /// Throws `.hashMismatch`, `.dimensionMismatch` or `.stateRootMismatch`.
    public static func scan(at path: String, check: RowCheck, expectedStateRoot: ContentID? = nil) throws(IndexError) -> IndexContents {
        let file = try FileIdentity(path: path)
        let db = try Database(path: path, mode: .readOnly(immutable: check == .none))
        return try scan(db, file: file, check: check, expectedStateRoot: expectedStateRoot)
    }

    static func scan(_ db: Database, file: FileIdentity, check: RowCheck, expectedStateRoot: ContentID?) throws(IndexError) -> IndexContents {
        try scanRows(db, file: file, check: check, expectedStateRoot: expectedStateRoot).contents
    }

    /// `scan`, with the state-root records it checked (none for `.none`).
    static func scanRows(_ db: Database, file: FileIdentity, check: RowCheck,
                         expectedStateRoot: ContentID?) throws(IndexError) -> (contents: IndexContents, records: [StateRoot.Record]) {
        let meta = try meta(in: db)
        // One column layout for every check; what a check does not need is selected as NULL.
        let text = check == .recomputedHashes ? "title, content, scenario, tags, source" : "NULL, NULL, scenario, tags, NULL"
        let hashes = check == .none ? "NULL, NULL, NULL" : "content_hash, metadata_hash, embedding_hash"
        let statement = try db.prepare("SELECT rowid, id, \(text), embedding, \(hashes) FROM chunks ORDER BY rowid")
        var rows = IndexContents.Rows(capacity: meta.chunkCount, dimension: meta.dimension)
        var records: [StateRoot.Record] = []
        if check != .none { records.reserveCapacity(meta.chunkCount) }
        while try statement.step() {
            let chunk = try ChunkRow.chunk(from: statement, first: 1)
            let embeddingHash = try statement.withBlob(at: 7) { (bytes) throws(IndexError) -> ContentID? in
                guard bytes.count == meta.dimension * 4 else {
                    throw IndexError(.dimensionMismatch, "a stored vector does not have the snapshot's dimension")
                }
                rows.append(rowid: statement.int64(at: 0), id: chunk.id, scenario: chunk.scenario, tags: chunk.tags, embedding: bytes)
                // The column is the vector's little-endian float32 bytes: exactly what the
                // embedding hash covers, so it is hashed as stored.
                return check == .recomputedHashes ? ContentID(hashing: bytes) : nil
            }
            switch check {
            case .none:
                continue
            case .storedHashes:
                records.append(try storedRecord(id: chunk.id, from: statement, first: 8))
            case .recomputedHashes:
                let record = StateRoot.Record(id: chunk.id, contentHash: chunk.contentHash, metadataHash: chunk.metadataHash,
                                              embeddingHash: embeddingHash!)
                guard statement.string(at: 8) == record.contentHash.hex, statement.string(at: 9) == record.metadataHash.hex,
                      statement.string(at: 10) == record.embeddingHash.hex else {
                    throw IndexError(.hashMismatch, "a chunk's stored hashes do not match its stored data; the snapshot was altered")
                }
                records.append(record)
            }
        }
        guard rows.ids.count == meta.chunkCount else {
            throw IndexError(check == .none ? .snapshotMalformed : .stateRootMismatch,
                             "the snapshot holds a different number of chunks than its meta says")
        }
        if check != .none {
            try Self.check(records: records, meta: meta, expectedStateRoot: expectedStateRoot)
        }
        return (IndexContents(meta: meta, file: file, rows: rows, lengths: try DocumentLengths(db: db)), records)
    }
}
