public import CairnCore
import CairnThreads
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Builds snapshot files (see `SnapshotSchema`) and applies deltas to copies of them.
public enum SnapshotWriter {
    /// Writes a new snapshot holding exactly `entries` at `path`, which must not exist yet.
    /// Rows are inserted in UTF-8 byte order of their ids, whatever order `entries` has, so the
    /// same rows always give the same file (protocol/snapshot.md, "Reproducible bytes").
    ///
    /// `meta.chunkCount` and `meta.stateRoot` must describe `entries` (see
    /// `SnapshotMeta.init(channel:version:dimension:modelID:entries:)`), and every vector must
    /// have `meta.dimension` values. On failure the partial file is removed.
    public static func create(at path: String, meta: SnapshotMeta, entries: [ChunkRecord]) throws(IndexError) {
        try validate(meta: meta)
        try validate(vectors: entries.map(\.vector), dimension: meta.dimension)
        let records = entries.map(\.stateRecord)
        guard Set(records.map { Array($0.id.utf8) }).count == records.count else {
            throw IndexError(.deltaMismatch, "two entries share one chunk id; ids must be unique within a version")
        }
        guard meta.chunkCount == entries.count, StateRoot.compute(records) == meta.stateRoot else {
            throw IndexError(.stateRootMismatch, "the meta's state root or chunk count does not describe the entries")
        }
        let stream = try Stream(at: path, dimension: meta.dimension)
        for (index, entry) in entries.enumerated() { try stream.add(entry.chunk, vector: entry.vector, origin: "entry \(index)") }
        let written = try stream.finish(channel: meta.channel, version: meta.version, modelID: meta.modelID)
        guard written == meta else {
            unlink(path)
            throw IndexError(.stateRootMismatch, "the written snapshot's meta does not describe the entries")
        }
    }

    /// One delta's edit of a snapshot's rows, as `apply` writes it: chunks to insert or replace
    /// by id, ids to delete.
    public struct Edit: Sendable {
        public var upserts: ChunkRecords
        public var deletes: [String]

        public init(upserts: ChunkRecords, deletes: [String]) {
            self.upserts = upserts
            self.deletes = deletes
        }

        public init(upserts: [ChunkRecord], deletes: [String]) {
            self.init(upserts: ChunkRecords(upserts), deletes: deletes)
        }

        /// A delta's upserts (decoded as they are read) and deletes.
        public init(_ delta: EncodedDelta) {
            self.init(upserts: delta.upserts, deletes: delta.deletes)
        }
    }

    /// What a refusal of `apply` leaves of the file.
    public enum Refused: Sendable {
        /// The file as it was: the transaction keeps a rollback journal in memory
        /// (`journal_mode=MEMORY`), the original of every page it changes. That grows with the
        /// rows changed: 200,000 rows spread over a million took about 600 MB.
        case rolledBack
        /// A file for the caller to remove: no journal is kept (`Database.turnOffJournal`), so
        /// memory and disk stay flat whatever the edits change, and a refusal leaves the file
        /// half changed.
        case discarded
    }

    /// How `apply` checks the rows it is about to commit.
    public enum ResultCheck: Sendable {
        /// The state root over every row's stored hashes (one read of four short columns per
        /// row) and the row count must equal the new meta's.
        case storedHashes
        /// The caller computed the result's state root before the file was touched, from the
        /// rows the edits apply to (`IndexContents.changed(deleting:upserting:)`); only the
        /// row count is checked here.
        case checkedByCaller
    }

    /// Applies upserts (insert or replace by id) and deletes to the snapshot at `path` (a copy of
    /// the installed one) in one transaction, keeping the FTS index in step, and sets `newMeta`.
    public static func apply(upserts: [ChunkRecord], deletes: [String], newMeta: SnapshotMeta,
                             to path: String) throws(IndexError) {
        try apply([Edit(upserts: upserts, deletes: deletes)], newMeta: newMeta, to: path, check: .storedHashes)
    }

    /// Applies `edits` in order (each one delta's: upserts insert or replace by id, deletes
    /// remove) to the snapshot at `path` in one transaction, keeping the FTS index in step, and
    /// sets `newMeta`. Several edits bring an older version's file up to the delta's base first.
    ///
    /// Refuses when: a deleted id is absent, an id appears twice in one edit, a vector's
    /// dimension differs from the snapshot's, or the resulting chunk count (and, with
    /// `.storedHashes`, the state root) differ from `newMeta`'s. A refusal leaves the file
    /// unchanged `ifRefused: .rolledBack`; `.discarded` is for a caller that removes the file on
    /// any refusal.
    ///
    /// `onRows` is called once every `rowsPerCall` rows changed: a caller starts the file's
    /// writeback there, so that the pages SQLite has written out go to disk while it goes on.
    ///
    /// The file is scratch until the caller fsyncs it: SQLite does not fsync (`synchronous=OFF`,
    /// not stored in the file), so a crash part-way leaves a file to discard, as a device
    /// discards its `.partial` folders at start-up.
    public static func apply(_ edits: [Edit], newMeta: SnapshotMeta, to path: String,
                             check: ResultCheck, ifRefused: Refused = .rolledBack,
                             rowsPerCall: Int = 512, onRows: (() -> Void)? = nil) throws(IndexError) {
        try validate(meta: newMeta)
        let db = try Database(path: path, mode: .readWrite)
        switch ifRefused {
        case .rolledBack: try db.exec("PRAGMA journal_mode=MEMORY")
        case .discarded: try db.turnOffJournal()
        }
        try db.exec("PRAGMA synchronous=OFF")
        // Freed cells and pages are left as they are, not overwritten with zeros (Debian's SQLite
        // is built with SECURE_DELETE on): the rows are signed public data, and the zeroing
        // wrote an overflow page again for every row rewritten or removed.
        try db.exec("PRAGMA secure_delete=OFF")
        let current = try Snapshot.meta(in: db)
        guard newMeta.dimension == current.dimension else {
            throw IndexError(.dimensionMismatch, "a delta cannot change the embedding dimension; install a full snapshot")
        }
        for edit in edits {
            if let bad = edit.upserts.vectorLength(otherThan: current.dimension) { throw dimensionMismatch(bad, current.dimension) }
            // Ids compare as bytes, as SQLite, the rows files and the state root do: Swift's
            // String equality takes "é" and "e" with a combining accent for one id, and refused a
            // delta that renames one to the other.
            let upserted = Set(edit.upserts.ids.map { Array($0.utf8) }), deleted = Set(edit.deletes.map { Array($0.utf8) })
            guard upserted.count == edit.upserts.ids.count, deleted.count == edit.deletes.count, upserted.isDisjoint(with: deleted) else {
                throw IndexError(.deltaMismatch, "a delta names one chunk id twice (upserted twice, deleted twice, or both)")
            }
        }

        try db.transaction { () throws(IndexError) in
            let locate = try db.prepare(FullTextSQL.locate)
            let indexed = try db.prepare(FullTextSQL.indexed)
            let ftsDelete = try db.prepare(FullTextSQL.remove)
            let ftsInsert = try db.prepare(FullTextSQL.add)
            let deleteRow = try db.prepare("DELETE FROM chunks WHERE rowid = ?1")
            let insert = try db.prepare(insertSQL)
            let update = try db.prepare(updateSQL)

            /// The rowid of the row holding `id` (read from the id index alone).
            func rowid(of id: String) throws(IndexError) -> Int64? {
                locate.reset()
                try locate.bind(id, at: 1)
                return try locate.step() ? locate.int64(at: 0) : nil
            }
            /// The title and content row `rowid` was indexed with.
            func text(of rowid: Int64) throws(IndexError) -> (title: String, content: String) {
                indexed.reset()
                try indexed.bind(rowid, at: 1)
                guard try indexed.step() else { throw IndexError(.snapshotMalformed, "row \(rowid) vanished while a delta was applied") }
                return (indexed.string(at: 0) ?? "", indexed.string(at: 1) ?? "")
            }
            /// Removes the row's terms from the FTS index using the values it was indexed with.
            func unindex(_ rowid: Int64, _ row: (title: String, content: String)) throws(IndexError) {
                ftsDelete.reset()
                try ftsDelete.bind(rowid, at: 1)
                try ftsDelete.bind(row.title, at: 2)
                try ftsDelete.bind(row.content, at: 3)
                try ftsDelete.run()
            }
            func index(rowid: Int64, _ chunk: Chunk) throws(IndexError) {
                ftsInsert.reset()
                try ftsInsert.bind(rowid, at: 1)
                try ftsInsert.bind(chunk.title, at: 2)
                try ftsInsert.bind(chunk.content, at: 3)
                try ftsInsert.run()
            }

            var rows = current.chunkCount
            var sinceCall = 0
            func rowChanged() {
                sinceCall += 1
                guard sinceCall >= rowsPerCall, let onRows else { return }
                sinceCall = 0
                onRows()
            }
            for edit in edits {
                rows += edit.upserts.count - edit.deletes.count
                // The rows the edit changes, in rowid order: FTS5 writes its pending terms out as
                // a new segment whenever it is given a rowid below the last one
                // (sqlite3Fts5IndexBeginWrite), so in the delta's (id) order nearly every other
                // row cost a segment and its merges. `upsert` is nil for a delete.
                var changed: [(rowid: Int64, upsert: Int?)] = []
                changed.reserveCapacity(edit.deletes.count + edit.upserts.count)
                for id in edit.deletes {
                    guard let rowid = try rowid(of: id) else {
                        throw IndexError(.deltaMismatch, "a delta deletes a chunk this snapshot does not hold; it was built for another version")
                    }
                    changed.append((rowid, nil))
                }
                var inserted: [Int] = []
                for (position, id) in edit.upserts.ids.enumerated() {
                    if let rowid = try rowid(of: id) { changed.append((rowid, position)) } else { inserted.append(position) }
                }
                changed.sort { $0.rowid < $1.rowid }
                for (rowid, position) in changed {
                    defer { rowChanged() }
                    let row = try text(of: rowid)
                    guard let position else {
                        try unindex(rowid, row)
                        deleteRow.reset()
                        try deleteRow.bind(rowid, at: 1)
                        try deleteRow.run()
                        continue
                    }
                    let upsert = edit.upserts[position], chunk = upsert.chunk
                    rows -= 1
                    // Same title and content bytes (not Swift's canonical equivalence: the
                    // tokenizer sees bytes): the row's terms stay as indexed, so a change of
                    // metadata or embedding alone costs no tokenizing.
                    let sameText = row.title.utf8.elementsEqual(chunk.title.utf8) && row.content.utf8.elementsEqual(chunk.content.utf8)
                    if !sameText { try unindex(rowid, row) }
                    update.reset()
                    try bindChunk(chunk, vector: upsert.vector, to: update)
                    try update.bind(rowid, at: 11)
                    try update.run()
                    guard db.changes == 1 else {
                        throw IndexError(.snapshotMalformed, "row \(rowid) no longer holds chunk \(chunk.id) while a delta was applied")
                    }
                    if !sameText { try index(rowid: rowid, chunk) }
                }
                // New rows last, in the delta's order, after every delete: each takes the rowid
                // above the largest left, as it did when rows were changed in the delta's order.
                for position in inserted {
                    defer { rowChanged() }
                    let upsert = edit.upserts[position]
                    insert.reset()
                    try bindChunk(upsert.chunk, vector: upsert.vector, to: insert)
                    try insert.run()
                    try index(rowid: db.lastInsertRowID, upsert.chunk)
                }
            }
            try writeMeta(newMeta, to: db)

            switch check {
            case .storedHashes:
                guard try Snapshot.storedStateRoot(in: db, count: newMeta.chunkCount) == newMeta.stateRoot else {
                    throw IndexError(.stateRootMismatch, "the delta does not produce the new version's state root; nothing was changed")
                }
            case .checkedByCaller:
                // Counted from the changes (each delete removed a row, each insert added one) on
                // the file's own count: `count(*)` would read the whole id index.
                guard rows == newMeta.chunkCount else {
                    throw IndexError(.stateRootMismatch, "the delta does not produce the new version's chunk count; nothing was changed")
                }
            }
        }
    }

    /// Reads the rows `edits` name (each by id: the id index's leaf, the row, its text and
    /// vector; for a row the edit removes, also the leaves of the rows before and after it) on
    /// `threads` threads at once, so that `apply`, which looks them up one after another, finds
    /// their pages in the page cache. On a large file that is not cached, each
    /// lookup is a few random reads, and a disk serves several at once faster than one after
    /// another (on the 2-core VM here, 2,000 random 4 kB reads of a 4.6 GB file: 335 ms one at a
    /// time, 147 ms eight at a time). A read that fails is left alone: `apply` reads the same
    /// rows and says what is wrong. Every connection is closed when this returns.
    ///
    /// A file that is nearly all in the page cache (`cachedShare`) is left alone: there the
    /// threads would only compete with `apply` for the cores (at a million rows, cached, the
    /// reads took 70-130 ms of a delta's 400).
    public static func prefetch(_ edits: [Edit], in path: String, threads: Int = 8) {
        let rows = edits.flatMap { edit in
            edit.deletes.map { Prefetched(id: $0, removed: true) } + edit.upserts.ids.map { Prefetched(id: $0, removed: false) }
        }
        guard !rows.isEmpty, cachedShare(of: path) < 0.9 else { return }
        // A thread for every 16 rows at least: a small delta's rows are read on a few.
        let parts = min(max(1, threads), max(1, rows.count / 16))
        let readers = (0..<parts).map { part in BackgroundWork.Pending { readRows(rows, part: part, of: parts, in: path) } }
        for reader in readers { reader.wait() }
    }

    /// The share of `probes` pages spread evenly over the file that are in the page cache
    /// (mincore(2) on each, not the whole file's map: that takes 50-65 ms for 3.7 GB); 0 when it
    /// cannot be told.
    public static func cachedShare(of path: String, probes: Int = 256) -> Double {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        let size = Int(lseek(fd, 0, SEEK_END)), page = Int(sysconf(Int32(_SC_PAGESIZE)))
        guard size > 0, page > 0, let map = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else { return 0 }
        defer { munmap(map, size) }
        let pages = (size + page - 1) / page, taken = min(max(1, probes), pages)
        var cached = 0
        for probe in 0..<taken {
            var resident: UInt8 = 0
            if mincore(map + (pages * probe / taken) * page, 1, &resident) == 0, resident & 1 == 1 { cached += 1 }
        }
        return Double(cached) / Double(taken)
    }

    /// A row `prefetch` reads: its id, and whether the edit removes it.
    private struct Prefetched {
        var id: String
        var removed: Bool
    }

    /// Reads every `parts`-th of `rows` from `part` on, through a connection of its own that is
    /// closed when it returns.
    private static func readRows(_ rows: [Prefetched], part: Int, of parts: Int, in path: String) {
        guard let db = try? Database(path: path, mode: .readOnly(immutable: false)),
              let find = try? db.prepare("SELECT rowid, title, content, embedding FROM chunks WHERE id = ?1"),
              let size = try? db.prepare("SELECT sz FROM chunks_fts_docsize WHERE id = ?1"),
              let before = try? db.prepare("SELECT rowid FROM chunks WHERE rowid < ?1 ORDER BY rowid DESC LIMIT 1"),
              let after = try? db.prepare("SELECT rowid FROM chunks WHERE rowid > ?1 ORDER BY rowid LIMIT 1") else { return }
        for index in stride(from: part, to: rows.count, by: parts) {
            find.reset()
            // Stepping reads the result's columns, the text's and vector's overflow pages too;
            // FTS5 rewrites the row's entry in its table of document sizes.
            guard (try? find.bind(rows[index].id, at: 1)) != nil, (try? find.step()) == true else { continue }
            let rowid = find.int64(at: 0)
            size.reset()
            guard (try? size.bind(rowid, at: 1)) != nil else { continue }
            _ = try? size.step()
            // A row of text and a float32 vector fills most of a leaf of `chunks`, so removing one
            // leaves its leaf nearly empty, and SQLite balances it with the leaves on either side
            // (balance_nonroot), which it reads then, one after another: most of the pages the
            // apply read from disk that had not been read ahead (docs/scale.md, "The leaves
            // beside a removed row"). A row rewritten in place is balanced only when it no
            // longer fits its leaf, which is rarer.
            guard rows[index].removed else { continue }
            for neighbour in [before, after] {
                neighbour.reset()
                guard (try? neighbour.bind(rowid, at: 1)) != nil else { continue }
                _ = try? neighbour.step()
            }
        }
    }

    /// The statements `apply` keeps `chunks_fts` in step with (public for `cairn-bench`, which
    /// times them alone).
    public enum FullTextSQL {
        /// A row's rowid by its id (?1), from the id index alone.
        public static let locate = "SELECT rowid FROM chunks WHERE id = ?1"
        /// The title and content row ?1 was indexed with.
        public static let indexed = "SELECT title, content FROM chunks WHERE rowid = ?1"
        /// Removes row ?1's terms, given the title (?2) and content (?3) it was indexed with.
        public static let remove = "INSERT INTO chunks_fts(chunks_fts, rowid, title, content) VALUES('delete', ?1, ?2, ?3)"
        /// Indexes row ?1's title (?2) and content (?3).
        public static let add = "INSERT INTO chunks_fts(rowid, title, content) VALUES(?1, ?2, ?3)"
    }

    // MARK: Helpers

    static let insertSQL = """
        INSERT INTO chunks(id, title, content, scenario, tags, source,
                           content_hash, metadata_hash, embedding, embedding_hash)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
        """

    /// Rewrites row ?11, which holds id ?1, with parameters 2…10 of `insertSQL`. The id is
    /// matched, not set: a SET of the id column, even to the same value, deletes and re-inserts
    /// its entry in the id index, which at a million rows dirtied a page of that index for nearly
    /// every upsert (a sixth of an in-place delta's page writes).
    static let updateSQL = """
        UPDATE chunks SET title = ?2, content = ?3, scenario = ?4, tags = ?5, source = ?6,
            content_hash = ?7, metadata_hash = ?8, embedding = ?9, embedding_hash = ?10
        WHERE rowid = ?11 AND id = ?1
        """

    /// Binds parameters 1…10 of `insertSQL` (and of `updateSQL`).
    static func bindChunk(_ chunk: Chunk, vector: [Float], to statement: Statement) throws(IndexError) {
        try statement.bind(chunk.id, at: 1)
        try statement.bind(chunk.title, at: 2)
        try statement.bind(chunk.content, at: 3)
        try statement.bind(chunk.scenario, at: 4)
        try statement.bind(ChunkRow.encodeTags(chunk.tags), at: 5)
        try statement.bind(chunk.source, at: 6)
        try statement.bind(chunk.contentHash.hex, at: 7)
        try statement.bind(chunk.metadataHash.hex, at: 8)
        try statement.bind(VectorBytes.encode(vector), at: 9)
        try statement.bind(StateRoot.embeddingHash(vector).hex, at: 10)
    }

    static func writeMeta(_ meta: SnapshotMeta, to db: Database) throws(IndexError) {
        let statement = try db.prepare("INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)")
        for (key, value) in meta.rows {
            statement.reset()
            try statement.bind(key, at: 1)
            try statement.bind(value, at: 2)
            try statement.run()
        }
    }

    static func validate(meta: SnapshotMeta) throws(IndexError) {
        guard meta.format == SnapshotMeta.currentFormat else {
            throw IndexError(.snapshotMalformed, "this build writes only \(SnapshotMeta.currentFormat) snapshots")
        }
        guard meta.dimension > 0, meta.version >= 0, meta.chunkCount >= 0 else {
            throw IndexError(.snapshotMalformed, "meta dimension must be positive, version and chunk count non-negative")
        }
    }

    static func validate(vectors: [[Float]], dimension: Int) throws(IndexError) {
        if let bad = vectors.first(where: { $0.count != dimension }) { throw dimensionMismatch(bad.count, dimension) }
    }

    /// The refusal of a vector of `count` values for a snapshot of `dimension`.
    static func dimensionMismatch(_ count: Int, _ dimension: Int) -> IndexError {
        IndexError(.dimensionMismatch, "a vector has \(count) values; the snapshot's dimension is \(dimension)")
    }
}
