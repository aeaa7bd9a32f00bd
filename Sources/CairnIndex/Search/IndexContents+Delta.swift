import CairnCore

extension IndexContents {
    /// Whether the rows carry their state-root leaves (`Snapshot.RowCheck` other than `.none`),
    /// which a delta to them needs to be checked in memory.
    public var hasLeaves: Bool { rows.leaves.count == rows.ids.count }

    /// These rows with `deletes` removed and `upserts` inserted or replaced, checked against
    /// them (`.deltaMismatch` when a deleted id is absent or an id is named twice,
    /// `.dimensionMismatch` for a vector of another length, `.snapshotMalformed` without leaves)
    /// and with the state root they give (protocol/state-root.md): the kept rows' leaves as
    /// loaded, the upserts' computed from their data. Reads no file, so a delta is checked
    /// before any file is touched.
    public func changed(deleting deletes: [String], upserting upserts: [(Chunk, [Float])]) throws(IndexError) -> Changed {
        let change = try Change(self, deletes: deletes, upserts: upserts)
        var leaves: [(id: String, leaf: ContentID)] = []
        leaves.reserveCapacity(rows.ids.count + upserts.count)
        for (row, id) in rows.ids.enumerated() where !change.removed.contains(row) {
            leaves.append((id, rows.leaves[row]))
        }
        for (position, (chunk, _)) in upserts.enumerated() { leaves.append((chunk.id, change.upsertLeaves[position])) }
        return Changed(base: self, change: change, upserts: upserts, stateRoot: StateRoot.compute(leaves: leaves), count: leaves.count)
    }

    /// A checked change to loaded rows (`changed(deleting:upserting:)`).
    public struct Changed: Sendable {
        let base: IndexContents
        fileprivate let change: Change
        let upserts: [(Chunk, [Float])]
        /// The state root and chunk count of the rows after the change.
        public let stateRoot: ContentID
        public let count: Int

        /// The contents of the snapshot at `path`, which holds the changed rows and `meta`
        /// (written by `SnapshotWriter.apply`, on the base version's file or on an older one
        /// brought up to it): rowids from the file's id index and row lengths from its FTS size
        /// table, everything else — vectors, scenarios, tags, leaves — from the base rows and the
        /// upserts, without reading the rows themselves. The file's ids must be exactly the
        /// changed rows' ids (else `.snapshotMalformed`).
        public func contents(ofFile path: String, meta: SnapshotMeta) throws(IndexError) -> IndexContents {
            let rows = base.rows
            let file = try FileIdentity(path: path)
            let db = try Database(path: path, mode: .readOnly(immutable: false))
            guard try Snapshot.meta(in: db) == meta, meta.chunkCount == count else {
                throw IndexError(.snapshotMalformed, "the changed snapshot's meta is not the new version's")
            }
            var upserted: [String: Int] = [:]
            upserted.reserveCapacity(upserts.count)
            for (position, (chunk, _)) in upserts.enumerated() { upserted[chunk.id] = position }

            // (rowid, id) from the id index (a few pages; the table's own pages hold the text and
            // vectors), put in rowid order: the order every other load uses.
            var pairs: [(rowid: Int64, id: String)] = []
            pairs.reserveCapacity(count)
            let statement = try db.prepare("SELECT rowid, id FROM chunks ORDER BY id")
            while try statement.step() { pairs.append((statement.int64(at: 0), statement.string(at: 1) ?? "")) }
            pairs.sort { $0.rowid < $1.rowid }

            var scenarioNames = [String](repeating: "", count: rows.scenarioCode.count)
            for (name, code) in rows.scenarioCode { scenarioNames[Int(code)] = name }
            // (No room reserved for the matrix: it is built whole below.)
            var result = Rows(capacity: count, dimension: 0)
            result.reserveLeaves(count)
            // Where each row's vector comes from: a row of the base (≥ 0) or upsert -1 - position.
            var sources: [Int] = []
            sources.reserveCapacity(count)
            for (rowid, id) in pairs {
                if let position = upserted[id] {
                    let chunk = upserts[position].0
                    result.appendRow(rowid: rowid, id: id, scenario: chunk.scenario, tags: Set(chunk.tags))
                    result.leaves.append(change.upsertLeaves[position])
                    sources.append(-1 - position)
                } else if let row = change.rowForID[id], !change.removed.contains(row) {
                    let code = rows.scenarioCodes[row]
                    result.appendRow(rowid: rowid, id: id, scenario: code < 0 ? nil : scenarioNames[Int(code)], tags: rows.tags[row])
                    result.leaves.append(rows.leaves[row])
                    sources.append(row)
                } else {
                    throw IndexError(.snapshotMalformed, "the changed snapshot holds a chunk that neither the old version nor the delta has")
                }
            }
            // The matrix in one allocation, a row copied at a time.
            let dimension = meta.dimension
            result.matrix = [Float](unsafeUninitializedCapacity: sources.count * dimension) { buffer, initialized in
                rows.matrix.withUnsafeBufferPointer { old in
                    for (index, source) in sources.enumerated() {
                        let target = buffer.baseAddress! + index * dimension
                        if source >= 0 {
                            target.initialize(from: old.baseAddress! + source * dimension, count: dimension)
                        } else {
                            upserts[-1 - source].1.withUnsafeBufferPointer { target.initialize(from: $0.baseAddress!, count: dimension) }
                        }
                    }
                }
                initialized = sources.count * dimension
            }
            guard result.ids.count == count else {
                throw IndexError(.snapshotMalformed, "the changed snapshot holds another number of chunks than the delta gives")
            }
            return IndexContents(meta: meta, file: file, rows: result, lengths: try DocumentLengths(db: db))
        }
    }

    /// Which loaded rows a delta removes or replaces.
    fileprivate struct Change: Sendable {
        let rowForID: [String: Int]
        /// Rows deleted or replaced by an upsert.
        let removed: Set<Int>
        /// Each upsert's state-root leaf, computed from its data.
        let upsertLeaves: [ContentID]

        init(_ contents: IndexContents, deletes: [String], upserts: [(Chunk, [Float])]) throws(IndexError) {
            guard contents.hasLeaves else {
                throw IndexError(.snapshotMalformed, "these rows were loaded without their state-root leaves")
            }
            var rowForID: [String: Int] = [:]
            rowForID.reserveCapacity(contents.rows.ids.count)
            for (row, id) in contents.rows.ids.enumerated() { rowForID[id] = row }
            var removed = Set<Int>()
            for id in deletes {
                guard let row = rowForID[id], removed.insert(row).inserted else {
                    throw IndexError(.deltaMismatch, "a delta deletes a chunk this version does not hold, or one id twice")
                }
            }
            var seen = Set<String>()
            for (chunk, vector) in upserts {
                guard seen.insert(chunk.id).inserted else {
                    throw IndexError(.deltaMismatch, "a delta names one chunk id twice (upserted twice, deleted twice, or both)")
                }
                guard vector.count == contents.meta.dimension else {
                    throw IndexError(.dimensionMismatch, "a vector has \(vector.count) values; the snapshot's dimension is \(contents.meta.dimension)")
                }
                if let row = rowForID[chunk.id] {
                    guard removed.insert(row).inserted else {
                        throw IndexError(.deltaMismatch, "a delta names one chunk id twice (upserted twice, deleted twice, or both)")
                    }
                }
            }
            self.rowForID = rowForID
            self.removed = removed
            upsertLeaves = upserts.map { StateRoot.Record(chunk: $0.0, embedding: $0.1).leaf }
        }
    }
}
