public import CairnCore

extension IndexContents {
    /// Whether the rows carry their state-root leaves (`Snapshot.RowCheck` other than `.none`),
    /// which a delta to them needs to be checked in memory.
    public var hasLeaves: Bool { rows.leaves.count == rows.ids.count }

    /// These rows with `deletes` removed and `upserts` inserted or replaced, checked against
    /// them (`.deltaMismatch` when a deleted id is absent or an id is named twice,
    /// `.dimensionMismatch` for a vector of another length, `.snapshotMalformed` without leaves)
    /// and with the state root they give (protocol/state-root.md): the kept rows' leaves as
    /// loaded, the upserts' computed from their data, merged in id order. Reads no file, so a
    /// delta is checked before any file is touched.
    public func changed(deleting deletes: [String], upserting upserts: [ChunkRecord]) throws(IndexError) -> CheckedDelta {
        let match = try RowMatch(self, deletes: deletes, upserts: upserts)
        var leaves: [ContentID] = []
        leaves.reserveCapacity(match.count)
        match.merge(rows) { source in
            switch source {
            case .base(let row): leaves.append(rows.leaves[row])
            case .upsert(let position): leaves.append(match.upsertLeaves[position])
            }
        }
        return CheckedDelta(base: self, match: match, upserts: upserts, stateRoot: StateRoot.compute(orderedLeaves: leaves))
    }

    /// A delta checked against loaded rows (`changed(deleting:upserting:)`): the state root it
    /// gives, the rows the changed file is expected to hold, and that file's contents.
    public struct CheckedDelta: Sendable {
        let base: IndexContents
        fileprivate let match: RowMatch
        let upserts: [ChunkRecord]
        /// The state root and chunk count of the rows after the delta.
        public let stateRoot: ContentID
        public var count: Int { match.count }

        /// The changed rows in the order the changed file is expected to hold them by rowid —
        /// the base rows' order, an upsert of a held id in that row's place, new ids after them
        /// in the delta's order (what `SnapshotWriter.apply` does to the base version's file, or
        /// to an older one brought up to it by the same changes) — with everything but their
        /// rowids. Reads no file: it can be built while the delta is being applied.
        public func expectedRows() -> ExpectedRows {
            let rows = base.rows
            var replacement = [Int32](repeating: -1, count: rows.ids.count)
            for (position, row) in match.upsertRows.enumerated() { if let row { replacement[row] = Int32(position) } }
            var sources: [RowSource] = []
            sources.reserveCapacity(count)
            for row in rows.ids.indices {
                if replacement[row] >= 0 { sources.append(.upsert(Int(replacement[row]))) } else if !match.removed[row] { sources.append(.base(row)) }
            }
            for (position, row) in match.upsertRows.enumerated() where row == nil { sources.append(.upsert(position)) }
            return ExpectedRows(sources: sources, rows: assemble(sources))
        }

        /// The changed rows of `sources` in that order, without rowids.
        private func assemble(_ sources: [RowSource]) -> Rows {
            let rows = base.rows
            var scenarioNames = [String](repeating: "", count: rows.scenarioCode.count)
            for (name, code) in rows.scenarioCode { scenarioNames[Int(code)] = name }
            // (No room reserved for the codes: they are built whole below.)
            var result = Rows(capacity: sources.count, dimension: 0)
            result.reserveLeaves(sources.count)
            for source in sources {
                switch source {
                case .base(let row):
                    let code = rows.scenarioCodes[row]
                    result.appendRow(id: rows.ids[row], scenario: code < 0 ? nil : scenarioNames[Int(code)], tags: rows.tags[row])
                    result.leaves.append(rows.leaves[row])
                case .upsert(let position):
                    let chunk = upserts[position].chunk
                    result.appendRow(id: chunk.id, scenario: chunk.scenario, tags: Set(chunk.tags))
                    result.leaves.append(match.upsertLeaves[position])
                }
            }
            // The codes in one allocation, a row copied (or an upsert quantized) at a time.
            let dimension = base.meta.dimension
            result.codes.reserveCapacity(sources.count * dimension)
            result.scales.reserveCapacity(sources.count)
            for source in sources {
                switch source {
                case .base(let row):
                    result.codes.append(contentsOf: rows.codes[row * dimension ..< (row + 1) * dimension])
                    result.scales.append(rows.scales[row])
                case .upsert(let position):
                    result.appendVector(upserts[position].vector)
                }
            }
            return result
        }

        /// The contents of the snapshot at `path`, which holds the changed rows and `meta`
        /// (written by `SnapshotWriter.apply`, on the base version's file or on an older one
        /// brought up to it): rowids from the file's id index, read in id order beside the
        /// changed rows' ids (which they must equal, else `.snapshotMalformed`), and the upserted
        /// rows' lengths from its FTS size table; everything else — vectors, scenarios, tags,
        /// leaves, the kept rows' lengths — from the base rows and the upserts (`expected`, when
        /// built beforehand and the file's rowids follow its order; else built here), without
        /// reading the rows themselves.
        public func contents(ofFile path: String, meta: SnapshotMeta, expected: ExpectedRows? = nil) throws(IndexError) -> IndexContents {
            let rows = base.rows
            let file = try FileIdentity(path: path)
            let db = try Database(path: path, mode: .readOnly(immutable: false))
            guard try Snapshot.meta(in: db) == meta, meta.chunkCount == count else {
                throw IndexError(.snapshotMalformed, "the changed snapshot's meta is not the new version's")
            }

            // The file's (rowid, id) pairs from its id index (a few pages; the table's own pages
            // hold the text and vectors), in id order, each matched with the row the delta puts
            // there.
            var inIDOrder: [RowSource] = []
            inIDOrder.reserveCapacity(count)
            var baseRowids = [Int64](repeating: 0, count: rows.ids.count)
            var upsertRowids = [Int64](repeating: 0, count: upserts.count)
            let statement = try db.prepare("SELECT rowid, id FROM chunks ORDER BY id")
            var matched = true
            try match.merge(rows) { (source) throws(IndexError) in
                guard matched, try statement.step(), let stored = statement.unsafeUTF8(at: 1) else {
                    matched = false
                    return
                }
                switch source {
                case .base(let row):
                    if !rows.ids[row].utf8.elementsEqual(stored) { matched = false }
                    baseRowids[row] = statement.int64(at: 0)
                case .upsert(let position):
                    if !upserts[position].chunk.id.utf8.elementsEqual(stored) { matched = false }
                    upsertRowids[position] = statement.int64(at: 0)
                }
                inIDOrder.append(source)
            }
            guard matched, try !statement.step() else {
                throw IndexError(.snapshotMalformed, "the changed snapshot's chunk ids are not the old version's changed by the delta")
            }
            func rowid(_ source: RowSource) -> Int64 {
                switch source {
                case .base(let row): baseRowids[row]
                case .upsert(let position): upsertRowids[position]
                }
            }

            // Rows in rowid order, the order every other load uses.
            var expected = expected ?? expectedRows()
            let ascending = zip(expected.sources, expected.sources.dropFirst()).allSatisfy { rowid($0) < rowid($1) }
            if !ascending {
                let sources = expected.sources.sorted { rowid($0) < rowid($1) }
                expected = ExpectedRows(sources: sources, rows: assemble(sources))
            }
            var result = expected.rows
            result.place(rowids: expected.sources.map(rowid))

            // `idOrder` from the id order read; lengths: kept rows' as loaded, upserted rows' read.
            var newRowForBase = [Int32](repeating: -1, count: rows.ids.count)
            var newRowForUpsert = [Int32](repeating: -1, count: upserts.count)
            for (newRow, source) in expected.sources.enumerated() {
                switch source {
                case .base(let row): newRowForBase[row] = Int32(newRow)
                case .upsert(let position): newRowForUpsert[position] = Int32(newRow)
                }
            }
            result.idOrder = inIDOrder.map { source in
                switch source {
                case .base(let row): newRowForBase[row]
                case .upsert(let position): newRowForUpsert[position]
                }
            }
            var tokens: [Int32] = []
            tokens.reserveCapacity(count)
            let sizes = try db.prepare(DocumentLengths.rowSQL)
            for source in expected.sources {
                let length = switch source {
                case .base(let row): base.lengths.tokens(rowid: rows.rowids[row])
                case .upsert: try DocumentLengths.read(rowid: rowid(source), from: sizes)
                }
                guard let length else {
                    throw IndexError(.snapshotMalformed, "a row of the changed snapshot has no full-text size record")
                }
                tokens.append(length)
            }
            return IndexContents(meta: meta, file: file, rows: result,
                                 lengths: DocumentLengths(rowids: result.rowids, tokens: tokens))
        }
    }

    /// `CheckedDelta.expectedRows()`: the changed rows without rowids, in the rowid order the
    /// changed file is expected to hold them.
    public struct ExpectedRows: Sendable {
        /// Where each row comes from.
        fileprivate let sources: [RowSource]
        fileprivate let rows: Rows
    }

    /// Where a row after a delta comes from: a loaded (base) row, by its index in `Rows`, or an
    /// upsert, by its position in the delta's upserts. One is made per row (up to a million):
    /// Int payloads keep it a plain value, with no allocation.
    fileprivate enum RowSource: Sendable {
        case base(Int)
        case upsert(Int)
    }

    /// A delta's ids matched to loaded rows: which rows it removes or replaces, found by id in
    /// `Rows.idOrder`.
    fileprivate struct RowMatch: Sendable {
        /// Per loaded row: deleted or replaced by an upsert.
        let removed: [Bool]
        /// Rows after the delta.
        let count: Int
        /// Upsert positions in UTF-8 byte order of their ids, and the ids.
        let upsertOrder: [Int]
        let upsertIDs: [String]
        /// Each upsert's state-root leaf, computed from its data.
        let upsertLeaves: [ContentID]
        /// The loaded row each upsert replaces (nil for a new id).
        let upsertRows: [Int?]

        init(_ contents: IndexContents, deletes: [String], upserts: [ChunkRecord]) throws(IndexError) {
            guard contents.hasLeaves else {
                throw IndexError(.snapshotMalformed, "these rows were loaded without their state-root leaves")
            }
            let rows = contents.rows
            var removed = [Bool](repeating: false, count: rows.ids.count)
            var removedCount = 0
            for id in deletes {
                guard let row = Self.row(of: id, in: rows), !removed[row] else {
                    throw IndexError(.deltaMismatch, "a delta deletes a chunk this version does not hold, or one id twice")
                }
                removed[row] = true
                removedCount += 1
            }
            var upsertRows = [Int?](repeating: nil, count: upserts.count)
            let upsertOrder = upserts.indices.sorted { upserts[$0].chunk.id.utf8.lexicographicallyPrecedes(upserts[$1].chunk.id.utf8) }
            for (index, position) in upsertOrder.enumerated() {
                let chunk = upserts[position].chunk, vector = upserts[position].vector
                guard index == 0 || !upserts[upsertOrder[index - 1]].chunk.id.utf8.elementsEqual(chunk.id.utf8) else {
                    throw IndexError(.deltaMismatch, "a delta names one chunk id twice (upserted twice, deleted twice, or both)")
                }
                guard vector.count == contents.meta.dimension else {
                    throw IndexError(.dimensionMismatch, "a vector has \(vector.count) values; the snapshot's dimension is \(contents.meta.dimension)")
                }
                if let row = Self.row(of: chunk.id, in: rows) {
                    guard !removed[row] else {
                        throw IndexError(.deltaMismatch, "a delta names one chunk id twice (upserted twice, deleted twice, or both)")
                    }
                    removed[row] = true
                    removedCount += 1
                    upsertRows[position] = row
                }
            }
            self.removed = removed
            self.upsertRows = upsertRows
            self.upsertOrder = upsertOrder
            upsertIDs = upserts.map(\.chunk.id)
            count = rows.ids.count - removedCount + upserts.count
            upsertLeaves = upserts.map(\.stateRecord.leaf)
        }

        /// The loaded row holding `id` (its UTF-8 bytes), by binary search in `idOrder`.
        static func row(of id: String, in rows: Rows) -> Int? {
            var low = 0, high = rows.idOrder.count
            while low < high {
                let middle = (low + high) / 2
                if rows.ids[Int(rows.idOrder[middle])].utf8.lexicographicallyPrecedes(id.utf8) { low = middle + 1 } else { high = middle }
            }
            guard low < rows.idOrder.count, rows.ids[Int(rows.idOrder[low])].utf8.elementsEqual(id.utf8) else { return nil }
            return Int(rows.idOrder[low])
        }

        /// Calls `body` with each row after the delta in UTF-8 byte order of its id: a kept
        /// loaded row or an upsert.
        func merge<E: Error>(_ rows: Rows, _ body: (RowSource) throws(E) -> Void) throws(E) {
            var next = 0
            for row in rows.idOrder where !removed[Int(row)] {
                let id = rows.ids[Int(row)]
                while next < upsertOrder.count, upsertIDs[upsertOrder[next]].utf8.lexicographicallyPrecedes(id.utf8) {
                    try body(.upsert(upsertOrder[next]))
                    next += 1
                }
                try body(.base(Int(row)))
            }
            while next < upsertOrder.count {
                try body(.upsert(upsertOrder[next]))
                next += 1
            }
        }
    }
}
