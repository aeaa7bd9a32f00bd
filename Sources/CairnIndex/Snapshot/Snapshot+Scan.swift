public import CairnCore

extension Snapshot {
    /// What a scan checks while it loads the rows.
    public enum RowCheck: Sendable {
        /// Nothing beyond the row count: an installed file, verified when it was installed, opened
        /// to serve.
        case none
        /// Nothing beyond the row count either, but each row's state-root leaf is kept from its
        /// stored hashes: a delta's result, whose state root the applying transaction checked,
        /// so that the next delta can be checked against the leaves in memory.
        case storedHashes
        /// Every row's three hashes recomputed from its data and compared with the stored ones,
        /// then the state root over them: a full snapshot (protocol/snapshot.md, "Verification").
        case recomputedHashes
    }

    /// The rows of one rowid range, loaded and (as the check says) hashed; `combine` joins the
    /// parts of a file, which may be scanned on as many threads at once.
    public struct ScanPart: Sendable {
        let meta: SnapshotMeta
        let file: FileIdentity
        let rows: IndexContents.Rows
        /// Read by part 0 only.
        let lengths: DocumentLengths?
    }

    /// One pass over every row in rowid order that loads what a `SearchIndex` keeps in memory
    /// and, unless `check` is `.none`, computes the state root as `check` says and compares it
    /// and the row count with the meta's and with `expectedStateRoot` (the signed manifest's).
    /// Throws `.hashMismatch`, `.dimensionMismatch` or `.stateRootMismatch`.
    public static func scan(at path: String, check: RowCheck, expectedStateRoot: ContentID? = nil) throws(IndexError) -> IndexContents {
        try combine([scanPart(at: path, check: check, part: 0, of: 1)], check: check, expectedStateRoot: expectedStateRoot)
    }

    /// The most of a file a scan maps into memory (the rest, if any, is read as usual).
    static let scanMapSize = 1 << 31 - 1

    /// Part `part` (from 0) of `parts` of `scan`: the rows of the `part`-th of `parts` equal
    /// rowid ranges, each opened on its own connection, so that the parts can run at once.
    public static func scanPart(at path: String, check: RowCheck, part: Int, of parts: Int) throws(IndexError) -> ScanPart {
        let file = try FileIdentity(path: path)
        let db = try Database(path: path, mode: .readOnly(immutable: false))
        // Reading the pages through a mapping instead of copying each into SQLite's cache.
        try db.exec("PRAGMA mmap_size = \(Self.scanMapSize)")
        let meta = try meta(in: db)
        var range: ClosedRange<Int64>?
        if parts > 1 {
            let bounds = try db.prepare("SELECT min(rowid), max(rowid) FROM chunks")
            if try bounds.step(), !bounds.isNull(at: 0) {
                let low = bounds.int64(at: 0), span = bounds.int64(at: 1) - low + 1
                range = (low + span * Int64(part) / Int64(parts))...(low + span * Int64(part + 1) / Int64(parts) - 1)
            }
        }
        return try scanPart(db, meta: meta, file: file, check: check, rowids: range, lengths: part == 0,
                            expectedRows: meta.chunkCount / max(1, parts) + 1)
    }

    /// The contents of a file from all its parts (in part order), after checking the row count
    /// and, unless `check` is `.none`, the state root against the meta's and `expectedStateRoot`.
    public static func combine(_ parts: [ScanPart], check: RowCheck, expectedStateRoot: ContentID?) throws(IndexError) -> IndexContents {
        guard let first = parts.first, let lengths = first.lengths,
              parts.allSatisfy({ $0.file == first.file && $0.meta == first.meta }) else {
            throw IndexError(.snapshotMalformed, "the scanned parts do not come from one file")
        }
        var rows = first.rows
        for part in parts.dropFirst() { rows.append(contentsOf: part.rows) }
        guard rows.ids.count == first.meta.chunkCount else {
            throw IndexError(check == .none ? .snapshotMalformed : .stateRootMismatch,
                             "the snapshot holds a different number of chunks than its meta says")
        }
        // The id order once: for the state root here and for the next delta (`Rows.idOrder`).
        if check != .none { rows.orderIDs() }
        if check == .recomputedHashes {
            try Self.check(orderedLeaves: rows.idOrder.map { rows.leaves[Int($0)] }, meta: first.meta, expectedStateRoot: expectedStateRoot)
        }
        return IndexContents(meta: first.meta, file: first.file, rows: rows, lengths: lengths)
    }

    /// The rows with rowids in `rowids` (all when nil) of an open file; `expectedRows` sizes the
    /// arrays up front (a part of a file holds about its share of the rows, not all of them).
    static func scanPart(_ db: Database, meta: SnapshotMeta, file: FileIdentity, check: RowCheck,
                         rowids: ClosedRange<Int64>?, lengths: Bool, expectedRows: Int) throws(IndexError) -> ScanPart {
        // One column layout for every check; what a check does not need is selected as NULL.
        let text = check == .recomputedHashes ? "title, content, scenario, tags, source" : "NULL, NULL, scenario, tags, NULL"
        let hashes = check == .none ? "NULL, NULL, NULL" : "content_hash, metadata_hash, embedding_hash"
        let statement = try db.prepare("SELECT rowid, id, \(text), embedding, \(hashes) FROM chunks "
            + (rowids == nil ? "" : "WHERE rowid BETWEEN ?1 AND ?2 ") + "ORDER BY rowid")
        if let rowids {
            try statement.bind(rowids.lowerBound, at: 1)
            try statement.bind(rowids.upperBound, at: 2)
        }
        var rows = IndexContents.Rows(capacity: expectedRows, dimension: meta.dimension)
        if check != .none { rows.reserveLeaves(expectedRows) }
        var rowCheck = StoredRowCheck()
        let empty = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
        while try statement.step() {
            let id = statement.string(at: 1) ?? ""
            let scenario = statement.string(at: 4)
            let tags = try ChunkRow.decodeTags(statement.string(at: 5) ?? "[]")
            try statement.withBlob(at: 7) { (bytes) throws(IndexError) in
                guard bytes.count == meta.dimension * 4 else {
                    throw IndexError(.dimensionMismatch, "a stored vector does not have the snapshot's dimension")
                }
                rows.append(rowid: statement.int64(at: 0), id: id, scenario: scenario, tags: tags, embedding: bytes)
                if check == .storedHashes { rows.leaves.append(try storedRecord(id: id, from: statement, first: 8).leaf) }
                guard check == .recomputedHashes else { return }
                // The text columns' bytes as stored, hashed without building a Chunk; the
                // embedding column is the vector's little-endian float32 bytes, exactly what the
                // embedding hash covers.
                let outcome = rowCheck.check(
                    id: id, title: statement.unsafeUTF8(at: 2) ?? empty, content: statement.unsafeUTF8(at: 3) ?? empty,
                    scenario: statement.unsafeUTF8(at: 4), tags: tags, source: statement.unsafeUTF8(at: 6), embedding: bytes,
                    storedHashes: (statement.unsafeUTF8(at: 8), statement.unsafeUTF8(at: 9), statement.unsafeUTF8(at: 10)))
                switch outcome {
                case .leaf(let leaf): rows.leaves.append(leaf)
                case .mismatch: throw IndexError(.hashMismatch, "a chunk's stored hashes do not match its stored data; the snapshot was altered")
                case .malformedHash: throw IndexError(.hashMismatch, "a chunk's stored hash is not a SHA-256 hex digest")
                }
            }
        }
        return ScanPart(meta: meta, file: file, rows: rows, lengths: lengths ? try DocumentLengths(db: db) : nil)
    }
}
