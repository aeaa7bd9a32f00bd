public import CairnCore
import Foundation

extension IndexContents {
    /// These rows with `deletes` removed and `upserts` inserted or replaced, checked against
    /// them (`.deltaMismatch` when a deleted id is absent or an id is named twice,
    /// `.dimensionMismatch` for a vector of another length) and with the state root they give
    /// (protocol/state-root.md): the kept rows' leaves as stored in the rows files, the upserts'
    /// computed from their data, merged in id order. Reads no snapshot file, so a delta is
    /// checked before any file is touched; costs a lookup per changed id and one pass over the
    /// leaves (32 bytes a row) for the root. When these rows' set hash is known (`setHash`), the
    /// result's is derived from it, by removing the leaves of the rows the delta removes or
    /// replaces and adding the upserts' (a few microseconds a changed row), so that the rows after
    /// the delta have it too; with `bySetHash` that is the whole check: no pass over the rows,
    /// and no state root (`CheckedDelta.stateRoot` nil; the caller checks `setHash`).
    public func changed(deleting deletes: [String], upserting upserts: ChunkRecords, bySetHash: Bool = false) throws(IndexError) -> CheckedDelta {
        var removedBase: Set<UInt32> = []
        var droppedOverlay: Set<Int> = []
        func remove(_ id: String) throws(IndexError) -> Bool {
            guard let row = row(id: id) else { return false }
            if row >= base.count {
                guard droppedOverlay.insert(row - base.count).inserted else { throw Self.twice }
            } else {
                guard removedBase.insert(UInt32(row)).inserted else { throw Self.twice }
            }
            return true
        }
        for id in deletes {
            guard try remove(id) else {
                throw IndexError(.deltaMismatch, "a delta deletes a chunk this version does not hold, or one id twice")
            }
        }
        let ids = upserts.ids
        let upsertOrder = ids.indices.sorted { ids[$0].utf8.lexicographicallyPrecedes(ids[$1].utf8) }
        for (index, position) in upsertOrder.enumerated() {
            guard index == 0 || !ids[upsertOrder[index - 1]].utf8.elementsEqual(ids[position].utf8) else { throw Self.twice }
            _ = try remove(ids[position])
        }
        if let bad = upserts.vectorLength(otherThan: meta.dimension) { throw SnapshotWriter.dimensionMismatch(bad, meta.dimension) }
        // Each upsert decoded once (a delta's are read from its encoding).
        let leaves = upserts.map(\.stateRecord.leaf)

        // The new overlay in id order: the kept overlay rows (already in id order) merged with
        // the upserts.
        var order: [OverlayRow] = []
        let kept = overlay.map { overlay in overlay.idOrder.map(Int.init).filter { !droppedOverlay.contains($0) } } ?? []
        order.reserveCapacity(kept.count + upserts.count)
        var next = 0
        for row in kept {
            let id = overlay!.id(row)
            while next < upsertOrder.count, ids[upsertOrder[next]].utf8.lexicographicallyPrecedes(id) {
                order.append(.upsert(upsertOrder[next]))
                next += 1
            }
            order.append(.kept(row))
        }
        order += upsertOrder[next...].map { .upsert($0) }

        let removed = (Array(overlay?.removed ?? UnsafeBufferPointer(start: nil, count: 0)) + removedBase).sorted()
        let count = base.count - removed.count + order.count
        let derivedSet = setHash.map { old in
            var set = old
            for row in removedBase { set.remove(leaf: base.leaf(Int(row))) }
            for row in droppedOverlay { set.remove(leaf: overlay!.leaf(row)) }
            for leaf in leaves { set.add(leaf) }
            return set
        }
        if bySetHash, let derivedSet {
            return CheckedDelta(rows: self, removed: removed, order: order, upserts: upserts, upsertLeaves: leaves,
                                stateRoot: nil, setHash: derivedSet, count: count)
        }
        // The root: the base rows still live, in their id order, merged with the new overlay.
        let removedBits = Self.bits(removed, count: base.count)
        var root = StateRoot.Accumulator(count: count)
        func add(_ row: OverlayRow) {
            switch row {
            case .kept(let local): root.add(leaf: overlay!.leaf(local))
            case .upsert(let position): leaves[position].bytes.withUnsafeBytes { root.add(leaf: $0) }
            }
        }
        // The base's live leaves between id-order positions, in runs: with rows in id order (a
        // full snapshot's), a run of rows is one block of leaves, hashed in one call.
        var removedAt = removed.startIndex
        let inRowOrder = base.idOrderIsRowOrder
        func addBase(_ positions: Range<Int>) {
            guard !positions.isEmpty else { return }
            guard inRowOrder else {
                for position in positions {
                    let row = Int(base.idOrder[position])
                    if removedBits[row / 64] & (1 << (UInt64(row) % 64)) == 0 { root.add(leaf: base.leaf(row)) }
                }
                return
            }
            var start = positions.lowerBound
            while removedAt < removed.endIndex, Int(removed[removedAt]) < positions.upperBound {
                let gap = Int(removed[removedAt])
                if gap >= start {
                    root.add(leaf: UnsafeRawBufferPointer(rebasing: base.leaves[start * 32..<gap * 32]))
                    start = gap + 1
                }
                removedAt += 1
            }
            root.add(leaf: UnsafeRawBufferPointer(rebasing: base.leaves[start * 32..<positions.upperBound * 32]))
        }
        // Each overlay row goes where its id falls among the base's (a binary search), after the
        // base rows before it.
        var position = 0
        for row in order {
            let at = insertionPoint(of: row, ids)
            addBase(position..<max(position, at))
            position = max(position, at)
            add(row)
        }
        addBase(position..<base.count)
        return CheckedDelta(rows: self, removed: removed, order: order, upserts: upserts, upsertLeaves: leaves,
                            stateRoot: root.finalize(), setHash: derivedSet, count: count)
    }

    private static var twice: IndexError {
        IndexError(.deltaMismatch, "a delta names one chunk id twice (upserted twice, deleted twice, or both)")
    }

    /// How many of the base's rows (live or not) have ids before the new overlay's `row`'s.
    private func insertionPoint(of row: OverlayRow, _ upsertIDs: [String]) -> Int {
        let order = base.idOrder
        var low = 0, high = order.count
        while low < high {
            let middle = (low + high) / 2
            // The base id at `middle` precedes the row's: the row goes after it.
            let before: Bool = switch row {
            case .kept(let local): base.id(Int(order[middle])).lexicographicallyPrecedes(overlay!.id(local))
            case .upsert(let position): base.id(Int(order[middle])).lexicographicallyPrecedes(upsertIDs[position].utf8)
            }
            if before { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// A row of the overlay a delta writes: a row of the current overlay kept, by its row there,
    /// or an upsert, by its position in the delta.
    fileprivate enum OverlayRow: Sendable {
        case kept(Int)
        case upsert(Int)
    }

    /// A delta checked against these rows (`changed(deleting:upserting:)`): the state root it
    /// gives, and what the rows files after it hold.
    public struct CheckedDelta: Sendable {
        /// The rows the delta applies to.
        let rows: IndexContents
        /// Every base row the new overlay removes, ascending.
        let removed: [UInt32]
        /// The new overlay's rows, in id order.
        fileprivate let order: [OverlayRow]
        let upserts: ChunkRecords
        let upsertLeaves: [ContentID]
        /// The state root of the rows after the delta; nil when the check derived their set
        /// hash instead.
        public let stateRoot: ContentID?
        /// The set hash of the rows after the delta, derived when the old rows' was known.
        public let setHash: SetHash?
        /// The chunk count after the delta.
        public let count: Int

        /// Whether the rows after the delta are the version that `stateRoot` (the signed one)
        /// and `setHash` (a delta's, if it has one) name: each hash the check computed and has
        /// an expected value for must match, and at least one must have been compared.
        public func gives(stateRoot expected: ContentID, setHash expectedSet: ContentID?, count expectedCount: Int) -> Bool {
            guard count == expectedCount else { return false }
            var compared = false
            if let stateRoot {
                guard stateRoot == expected else { return false }
                compared = true
            }
            if let setHash, let expectedSet {
                guard setHash.digest(count: count) == expectedSet else { return false }
                compared = true
            }
            return compared
        }

        /// Whether the rows after the delta still fit an overlay beside the base (else a scan of
        /// the changed file writes a new base): the overlay's rows and the base's removed ones at
        /// most a quarter of the base, or `minimumOverlay`. Each query scores the overlay's rows
        /// beside the base's and each delta rewrites the overlay, so both costs follow the
        /// changes since the last base, not the index; a full snapshot starts a new base.
        public var fitsOverlay: Bool { order.count + removed.count <= max(rows.base.count / 4, Self.minimumOverlay) }

        /// The overlay rows allowed whatever the base's size (a base of a few thousand rows is
        /// cheap to rewrite, but an overlay of that many is cheap to keep).
        public static let minimumOverlay = 4_096

        /// The overlay rows whose codes are held before they are written.
        static let batchRows = 1_024

        /// Live base rows whose rowid and id the changed file is checked for, spread over the base:
        /// the file must have kept the base's rows where they were (`SnapshotWriter.apply`
        /// updates in place and deletes; it never moves a row).
        static let rowidSample = 64

        /// The rows files of the snapshot at `path`, which holds the changed rows and `meta`
        /// (written by `SnapshotWriter.apply` on this version's file or on an older one brought
        /// up to it): the base rows file at `basePath` (where these rows' base is now, e.g. in
        /// this version's folder) linked beside `path` and served through these rows' own
        /// mapping of it, and a new overlay holding the kept overlay rows and the upserts, whose rowids and lengths are
        /// read from the file by id. Nil when the rows no longer fit an overlay (`fitsOverlay`),
        /// are not `meta`'s version (`gives`, with the delta's set hash `setHash` when it has one)
        /// or the base file is not at hand: the caller then scans the file.
        public func contents(ofFile path: String, meta: SnapshotMeta, setHash expectedSet: ContentID?,
                             basePath: String) throws(IndexError) -> IndexContents? {
            guard fitsOverlay, gives(stateRoot: meta.stateRoot, setHash: expectedSet, count: meta.chunkCount),
                  rows.base.isFile(at: basePath) else { return nil }
            let db = try Database(path: path, mode: .readOnly(immutable: false))
            guard try Snapshot.meta(in: db) == meta else {
                throw IndexError(.snapshotMalformed, "the changed snapshot's meta is not the new version's")
            }
            let find = try db.prepare("SELECT rowid FROM chunks WHERE id = ?1")
            let sizes = try db.prepare(DocumentLengths.rowSQL)
            let old = rows.overlay
            let dimension = meta.dimension

            // The overlay's rows in id order (its id order is then 0, 1, …), their codes written
            // a batch at a time: a quarter of a million rows' would be a hundred megabytes. A
            // writer dropped before `finish` removes its file.
            let writer = try RowFileWriter(path: IndexContents.overlayPath(beside: path), count: order.count, dimension: dimension)
            var batch = RowFileWriter.Batch(), written = 0
            var rowids: [Int64] = []
            rowids.reserveCapacity(order.count)
            var rest = RowFileWriter.Rest()
            var scenarioCode: [String: Int32] = [:], tagCode: [String: UInt32] = [:]
            func code(scenario: String?) -> Int32 {
                guard let scenario else { return -1 }
                if let code = scenarioCode[scenario] { return code }
                rest.dictionary.scenarios.append(scenario)
                scenarioCode[scenario] = Int32(rest.dictionary.scenarios.count - 1)
                return Int32(rest.dictionary.scenarios.count - 1)
            }
            func code(tag: String) -> UInt32 {
                if let code = tagCode[tag] { return code }
                rest.dictionary.tags.append(tag)
                tagCode[tag] = UInt32(rest.dictionary.tags.count - 1)
                return UInt32(rest.dictionary.tags.count - 1)
            }
            for row in order {
                switch row {
                case .kept(let local):
                    let old = old!
                    batch.codes += old.codes[local * dimension..<(local + 1) * dimension]
                    batch.scales.append(old.scales[local])
                    let words = RowFile.Layout.signWords(dimension)
                    batch.signs += old.signs[local * words..<(local + 1) * words]
                    batch.rowids.append(old.rowids[local])
                    batch.lengths.append(old.lengths[local])
                    rest.scenarios.append(code(scenario: rows.scenario(rows.base.count + local) < 0 ? nil
                        : rows.scenarioNames[Int(rows.scenario(rows.base.count + local))]))
                    rest.tagCodes += rows.tags(rows.base.count + local).sorted().map { code(tag: $0) }
                    rest.idBytes += old.id(local)
                    rest.leaves += old.leaf(local)
                case .upsert(let position):
                    let record = upserts[position], chunk = record.chunk
                    find.reset()
                    try find.bind(chunk.id, at: 1)
                    guard try find.step() else {
                        throw IndexError(.snapshotMalformed, "the changed snapshot does not hold an upserted chunk")
                    }
                    let rowid = find.int64(at: 0)
                    let length = try DocumentLengths.read(rowid: rowid, from: sizes) ?? -1
                    record.vector.withUnsafeBytes { batch.append(vector: $0, rowid: rowid, length: length) }
                    rest.scenarios.append(code(scenario: chunk.scenario))
                    rest.tagCodes += Set(chunk.tags).sorted().map { code(tag: $0) }
                    rest.idBytes += chunk.id.utf8
                    rest.leaves += upsertLeaves[position].bytes
                }
                rest.tagOffsets.append(UInt32(rest.tagCodes.count))
                rest.idOffsets.append(UInt64(rest.idBytes.count))
                rowids.append(batch.rowids[batch.count - 1])
                if batch.count == Self.batchRows {
                    try writer.write(first: written, batch: batch)
                    written += batch.count
                    batch.removeAll()
                }
            }
            try writer.write(first: written, batch: batch)
            rest.idOrder = (0..<UInt32(order.count)).map { $0 }
            rest.removed = removed
            guard try keepsBaseRows(db, newRowids: rowids) else { return nil }

            let linked = IndexContents.basePath(beside: path)
            // (The same file when the delta was applied in the base's own folder.)
            if !rows.base.isFile(at: linked) {
                unlink(linked)
                guard link(basePath, linked) == 0 else {
                    throw IndexError(errno == ENOSPC ? .diskFull : .io, "cannot link the base rows file beside the changed snapshot: \(String(cString: strerror(errno)))")
                }
            }
            try writer.finish(rest, identity: .init(kind: .overlay, version: meta.version, stateRoot: meta.stateRoot,
                                                    baseCount: rows.base.count, baseStateRoot: rows.base.stateRoot), durable: false)
            // The base is the installed version's file (a hard link): its mapping is shared, so
            // the pages that version's queries and moment sample mapped need no fault again (a
            // new mapping's sample alone took 20-40 ms at a million rows).
            let contents = try IndexContents(meta: meta, base: rows.base, overlay: RowFile(path: writer.path, dimension: dimension))
            if let setHash { contents.setHashCache.withLock { $0 = setHash } }
            return contents
        }

        /// Whether the changed file holds the base's live rows at the base's rowids: none of the
        /// overlay's rowids is a live base row's, and a sample of live base rows have their ids
        /// at their rowids. False for a file whose rows were placed otherwise (written whole from
        /// other rowids, say): its rows files are then written by a scan.
        private func keepsBaseRows(_ db: Database, newRowids: [Int64]) throws(IndexError) -> Bool {
            let base = rows.base
            let removedBits = IndexContents.bits(removed, count: base.count)
            func live(_ row: Int) -> Bool { removedBits[row / 64] & (1 << (UInt64(row) % 64)) == 0 }
            // The base's rowids ascend (`RowFile` checks): a few new rowids are each looked up by
            // halving; many, by one walk of them sorted along the base's (no table of every base
            // row, tens of MB at a million rows).
            if newRowids.count < base.count / 8 {
                for rowid in newRowids {
                    if let row = IndexContents.search(base.rowids, rowid), live(row) { return false }
                }
            } else {
                var row = 0
                for rowid in newRowids.sorted() {
                    while row < base.count, base.rowids[row] < rowid { row += 1 }
                    if row < base.count, base.rowids[row] == rowid, live(row) { return false }
                }
            }
            let sampled = (0..<Self.rowidSample).map { $0 * base.count / Self.rowidSample }.filter { $0 < base.count && live($0) }
            let statement = try db.prepare("SELECT id FROM chunks WHERE rowid = ?1")
            for row in Set(sampled) {
                statement.reset()
                try statement.bind(base.rowids[row], at: 1)
                guard try statement.step(), let id = statement.unsafeUTF8(at: 0), base.id(row).elementsEqual(id) else { return false }
            }
            return true
        }
    }
}
