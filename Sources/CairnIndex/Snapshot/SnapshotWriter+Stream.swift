public import CairnCore
import Foundation

extension SnapshotWriter {
    /// Writes a snapshot file from rows given one at a time, in any order, holding none of them:
    /// each row goes to a staging database beside the file (`<path>-staging`, removed at the
    /// end), indexed by id; `finish` computes the state root over the staged rows in id order,
    /// then writes the snapshot exactly as `create` would — the same statements on the same rows
    /// in the same order — so the bytes are the same (protocol/snapshot.md, "Reproducible
    /// bytes"), whatever the number of rows. Memory stays SQLite's page caches and the sorter's
    /// buffers. Dropped before `finish` succeeds, it removes both files.
    public final class Stream {
        public let path: String
        public let dimension: Int
        private let staging: String
        private let db: Database
        private var insert: Statement?
        /// Rows added so far.
        public private(set) var count = 0
        private var finished = false
        /// Rows staged per transaction.
        static let batchRows = 4_096

        /// Creates the snapshot file at `path` (which must not exist) and its staging database.
        public init(at path: String, dimension: Int) throws(IndexError) {
            guard dimension > 0 else { throw IndexError(.snapshotMalformed, "meta dimension must be positive") }
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            guard fd >= 0 else {
                let code = errno
                throw code == EEXIST
                    ? IndexError(.fileExists, "the snapshot file already exists; snapshots are written once to a new path")
                    : IndexError(.sqlite, "cannot create the snapshot file: \(String(cString: strerror(code)))")
            }
            close(fd)
            self.path = path
            self.dimension = dimension
            staging = path + "-staging"
            unlink(staging)
            do {
                // (With CREATE, which ATTACH needs for the staging file; the snapshot file exists.)
                db = try Database(path: path, mode: .readWriteCreate)
                try db.exec(SnapshotSchema.pragmas)
                let attach = try db.prepare("ATTACH DATABASE ?1 AS staging")
                try attach.bind(staging, at: 1)
                try attach.run()
                try db.turnOffJournal(schema: "staging")
                try db.exec("""
                    PRAGMA staging.synchronous = OFF;
                    CREATE TABLE staging.rows(id, title, content, scenario, tags, source, content_hash, metadata_hash,
                                              embedding, embedding_hash, origin);
                    CREATE UNIQUE INDEX staging.rows_by_id ON rows(id);
                    """)
            } catch {
                unlink(path)
                unlink(staging)
                throw error
            }
        }

        deinit {
            guard !finished else { return }
            insert = nil
            unlink(path)
            unlink(path + "-journal")
            unlink(staging)
        }

        /// Stages one row; `origin` says where it came from (a file and record), for the message
        /// when a later row repeats its id (`.duplicateID`).
        public func add(_ chunk: Chunk, vector: [Float], origin: String) throws(IndexError) {
            guard vector.count == dimension else {
                throw IndexError(.dimensionMismatch, "a vector has \(vector.count) values; the snapshot's dimension is \(dimension)")
            }
            if insert == nil {
                try db.exec("BEGIN")
                insert = try db.prepare("INSERT INTO staging.rows VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)", persistent: true)
            }
            let statement = insert!
            statement.reset()
            try bindChunk(chunk, vector: vector, to: statement)
            try statement.bind(origin, at: 11)
            do { try statement.run() } catch {
                let first = try? firstOrigin(of: chunk.id)
                guard let first else { throw error }
                throw IndexError(.duplicateID, "duplicate id \"\(chunk.id)\" (first seen in \(first))")
            }
            count += 1
            if count % Self.batchRows == 0 { try commit() }
        }

        private func commit() throws(IndexError) {
            guard insert != nil else { return }
            insert = nil
            try db.exec("COMMIT")
        }

        /// Where the staged row with `id` came from.
        private func firstOrigin(of id: String) throws(IndexError) -> String? {
            try commit()
            let statement = try db.prepare("SELECT origin FROM staging.rows WHERE id = ?1")
            try statement.bind(id, at: 1)
            return try statement.step() ? statement.string(at: 0) : nil
        }

        /// The set hash of the rows `finish` wrote (protocol/state-root.md, "Set hash"), which a
        /// delta to this version carries; nil before.
        public private(set) var setHash: ContentID?

        /// Writes the snapshot of the staged rows with this meta (the state root and row count
        /// computed from them), removes the staging database, and returns the meta.
        public func finish(channel: String, version: Int, modelID: String) throws(IndexError) -> SnapshotMeta {
            try commit()
            // The state root and the set hash over the stored hashes, which `bindChunk` computed
            // from each row's data.
            var root = StateRoot.Accumulator(count: count)
            var set = SetHash()
            let rows = try db.prepare("SELECT id, content_hash, metadata_hash, embedding_hash FROM staging.rows ORDER BY id")
            var staged = 0
            while try rows.step() {
                staged += 1
                try Snapshot.storedRecord(id: rows.string(at: 0) ?? "", from: rows, first: 1).leaf.bytes.withUnsafeBytes {
                    root.add(leaf: $0)
                    set.add(leaf: $0)
                }
            }
            guard staged == count else { throw IndexError(.sqlite, "the staged rows cannot be read back whole") }
            let meta = SnapshotMeta(channel: channel, version: version, stateRoot: root.finalize(), dimension: dimension,
                                    modelID: modelID, chunkCount: count)
            setHash = set.digest(count: count)
            try validate(meta: meta)
            // `create`'s statements, the rows inserted in id order from the staging index.
            try db.transaction { () throws(IndexError) in
                try db.exec(SnapshotSchema.tables)
                try writeMeta(meta, to: db)
                try db.exec("""
                    INSERT INTO chunks(id, title, content, scenario, tags, source, content_hash, metadata_hash, embedding, embedding_hash)
                    SELECT id, title, content, scenario, tags, source, content_hash, metadata_hash, embedding, embedding_hash
                    FROM staging.rows ORDER BY id
                    """)
                try db.exec("INSERT INTO chunks_fts(chunks_fts) VALUES('rebuild')")
            }
            try db.exec("DETACH DATABASE staging")
            unlink(staging)
            try db.exec("INSERT INTO chunks_fts(chunks_fts) VALUES('optimize')")
            try db.exec("VACUUM")
            finished = true
            return meta
        }
    }
}
