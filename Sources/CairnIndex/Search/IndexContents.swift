public import CairnCore
import Foundation
import Synchronization

/// What a `SearchIndex` keeps of one snapshot file's rows: a base rows file and, after deltas,
/// an overlay of the rows they changed (`RowFile`, protocol/data-directory.md "Rows files"),
/// both memory-mapped. Row numbers run over the base's rows (0 ..< base.count; those the overlay
/// removed are not live) and then the overlay's. Opening costs a header check and a bitmap of
/// the removed rows, whatever the number of rows; a query reads codes, signs and the rest through
/// the mappings.
///
/// Written by the pass that verifies a full snapshot (`Snapshot.scan`), or by a delta from the
/// rows of the version it applies to (`CheckedDelta.contents(ofFile:meta:setHash:basePath:)`). Immutable, but for
/// the set hash of its rows, computed once when asked for (`computeSetHash`) or handed over by the
/// delta check that made them.
public final class IndexContents: Sendable {
    public let meta: SnapshotMeta
    let base: RowFile
    let overlay: RowFile?
    /// One bit per base row, set when the overlay removed it (empty when it removed none).
    private let removedBits: [UInt64]
    /// The scenarios and tags of both files, under one numbering (the base's own first).
    let scenarioNames: [String]
    let scenarioCode: [String: Int32]
    let tagNames: [String]
    let tagCode: [String: UInt32]
    /// The overlay's scenario and tag codes in that numbering.
    private let overlayScenarios: [Int32]
    private let overlayTags: [UInt32]
    /// The overlay's rows by rowid.
    private let overlayRows: [Int64: Int32]
    /// The base's first rowid when its rowids run first, first + 1, … (a full snapshot's do).
    private let baseFirstRowid: Int64?
    /// The live rows' set hash, once known.
    let setHashCache = Mutex<SetHash?>(nil)

    /// Live rows: the version's chunks.
    public var count: Int { meta.chunkCount }
    /// Row numbers in use, live or not: the base's rows, then the overlay's.
    var slots: Int { base.count + (overlay?.count ?? 0) }
    /// Rows an overlay holds (0 without one): what the next delta carries forward.
    public var overlayCount: Int { overlay?.count ?? 0 }
    /// Base rows the overlay removed.
    public var removedCount: Int { overlay?.removed.count ?? 0 }
    /// Whether any base row is removed (then loops over rows check `isLive`).
    var hasRemoved: Bool { !removedBits.isEmpty }

    /// The rows files beside a snapshot file `NAME.sqlite` (or any other extension): `NAME.rows`
    /// and, after deltas, `NAME.overlay`.
    public static func basePath(beside index: String) -> String { sibling(of: index, extension: "rows") }
    public static func overlayPath(beside index: String) -> String { sibling(of: index, extension: "overlay") }

    private static func sibling(of index: String, extension: String) -> String {
        ((index as NSString).deletingPathExtension as NSString).appendingPathExtension(`extension`)!
    }

    init(meta: SnapshotMeta, base: RowFile, overlay: RowFile?) throws(IndexError) {
        let problem = "the rows files beside the snapshot do not describe version \(meta.version)"
        if let overlay {
            guard overlay.kind == .overlay, overlay.version == meta.version, overlay.stateRoot == meta.stateRoot,
                  base.kind == .base, overlay.baseCount == base.count, overlay.baseStateRoot == base.stateRoot,
                  base.count - overlay.removed.count + overlay.count == meta.chunkCount else {
                throw IndexError(.snapshotMalformed, problem)
            }
        } else {
            guard base.kind == .base, base.version == meta.version, base.stateRoot == meta.stateRoot,
                  base.count == meta.chunkCount else {
                throw IndexError(.snapshotMalformed, problem)
            }
        }
        self.meta = meta
        self.base = base
        self.overlay = overlay

        let baseNames = try base.dictionary()
        var scenarioNames = baseNames.scenarios, tagNames = baseNames.tags
        // Not `uniqueKeysWithValues`, which traps on a repeated name: the dictionary section
        // is outside the header's checksum, and a damaged one must be refused (the rows are
        // then scanned again), not stop cairnd at every start.
        var scenarioCode = Dictionary(scenarioNames.enumerated().map { ($1, Int32($0)) }) { first, _ in first }
        var tagCode = Dictionary(tagNames.enumerated().map { ($1, UInt32($0)) }) { first, _ in first }
        guard scenarioCode.count == scenarioNames.count, tagCode.count == tagNames.count else {
            throw IndexError(.snapshotMalformed, "the rows file \(base.path) names a scenario or tag twice")
        }
        var overlayScenarios: [Int32] = [], overlayTags: [UInt32] = []
        var overlayRows: [Int64: Int32] = [:]
        var removedBits: [UInt64] = []
        if let overlay {
            let names = try overlay.dictionary()
            overlayScenarios = names.scenarios.map { name in
                if let code = scenarioCode[name] { return code }
                scenarioNames.append(name)
                scenarioCode[name] = Int32(scenarioNames.count - 1)
                return Int32(scenarioNames.count - 1)
            }
            overlayTags = names.tags.map { name in
                if let code = tagCode[name] { return code }
                tagNames.append(name)
                tagCode[name] = UInt32(tagNames.count - 1)
                return UInt32(tagNames.count - 1)
            }
            overlayRows.reserveCapacity(overlay.count)
            for (row, rowid) in overlay.rowids.enumerated() { overlayRows[rowid] = Int32(row) }
            if !overlay.removed.isEmpty { removedBits = Self.bits(overlay.removed, count: base.count) }
        }
        (self.scenarioNames, self.scenarioCode, self.tagNames, self.tagCode) = (scenarioNames, scenarioCode, tagNames, tagCode)
        (self.overlayScenarios, self.overlayTags, self.overlayRows, self.removedBits) = (overlayScenarios, overlayTags, overlayRows, removedBits)
        let rowids = base.rowids
        // Overflow-checked: a damaged first rowid (a flipped top bit) must not stop the process.
        if let first = rowids.first, rowids[rowids.count - 1].subtractingReportingOverflow(first) == (Int64(rowids.count - 1), false) {
            baseFirstRowid = first
        } else {
            baseFirstRowid = rowids.isEmpty ? 1 : nil
        }
    }

    /// The rows files beside the snapshot file at `index`, when they are there and describe
    /// `meta`; nil when there are none or they describe another version (a scan then writes
    /// them anew). Throws when they cannot be opened or mapped now (`.io`): a scan would read
    /// every row, and its own rows file would fail the same way.
    static func open(beside index: String, meta: SnapshotMeta) throws(IndexError) -> IndexContents? {
        func rows(_ path: String) throws(IndexError) -> RowFile? {
            do throws(IndexError) { return try RowFile(path: path, dimension: meta.dimension) } catch {
                if error.isEnvironmental { throw error }
                return nil
            }
        }
        let basePath = basePath(beside: index), overlayPath = overlayPath(beside: index)
        guard let base = try rows(basePath) else { return nil }
        let overlay: RowFile?
        if access(overlayPath, F_OK) == 0 {
            guard let opened = try rows(overlayPath) else { return nil }
            overlay = opened
        } else {
            overlay = nil
        }
        return try? IndexContents(meta: meta, base: base, overlay: overlay)
    }

    /// One bit per row of `count`, set for each row in `rows`.
    static func bits(_ rows: some Sequence<UInt32>, count: Int) -> [UInt64] {
        var bits = [UInt64](repeating: 0, count: (count + 63) / 64)
        for row in rows { bits[Int(row) / 64] |= 1 << (UInt64(row) % 64) }
        return bits
    }

    // MARK: Rows

    /// Whether `row` holds one of the version's chunks (a base row an overlay removed does not).
    @inline(__always)
    func isLive(_ row: Int) -> Bool {
        row >= base.count || removedBits.isEmpty || removedBits[row / 64] & (1 << (UInt64(row) % 64)) == 0
    }

    func rowid(_ row: Int) -> Int64 {
        row < base.count ? base.rowids[row] : overlay!.rowids[row - base.count]
    }

    /// The rowids of every row, live or not (nil without rows).
    var rowidRange: ClosedRange<Int64>? {
        let ends = [base.rowids.first, base.rowids.last, overlayRows.keys.min(), overlayRows.keys.max()].compactMap { $0 }
        guard let low = ends.min(), let high = ends.max() else { return nil }
        return low...high
    }

    /// The live row with `rowid`, or nil.
    @inline(__always)
    func row(rowid: Int64) -> Int? {
        if let first = baseFirstRowid {
            // A damaged doclist's rowid far below the first must not overflow the subtraction.
            let (row, overflow) = rowid.subtractingReportingOverflow(first)
            if !overflow, row >= 0, row < Int64(base.count), isLive(Int(row)) { return Int(row) }
        } else if let row = Self.search(base.rowids, rowid), isLive(row) {
            return row
        }
        guard !overlayRows.isEmpty, let row = overlayRows[rowid] else { return nil }
        return base.count + Int(row)
    }

    static func search(_ rowids: UnsafeBufferPointer<Int64>, _ rowid: Int64) -> Int? {
        var low = 0, high = rowids.count
        while low < high {
            let middle = (low + high) / 2
            if rowids[middle] < rowid { low = middle + 1 } else { high = middle }
        }
        return low < rowids.count && rowids[low] == rowid ? low : nil
    }

    /// Row `row`'s id as UTF-8 bytes, valid while the contents are.
    func idBytes(_ row: Int) -> UnsafeRawBufferPointer {
        row < base.count ? base.id(row) : overlay!.id(row - base.count)
    }

    func id(_ row: Int) -> String { String(decoding: idBytes(row), as: UTF8.self) }

    /// Row `row`'s scenario code (`scenarioNames`), -1 for none.
    func scenario(_ row: Int) -> Int32 {
        if row < base.count { return base.scenarios[row] }
        let code = overlay!.scenarios[row - base.count]
        return code < 0 ? -1 : overlayScenarios[Int(code)]
    }

    /// Whether row `row` carries every tag in `required` (codes in `tagNames`).
    func hasTags(_ row: Int, _ required: [UInt32]) -> Bool {
        let (file, local, map) = row < base.count ? (base, row, nil) : (overlay!, row - base.count, overlayTags)
        let codes = file.tagCodes[Int(file.tagOffsets[local])..<Int(file.tagOffsets[local + 1])]
        return required.allSatisfy { tag in codes.contains { (map?[Int($0)] ?? $0) == tag } }
    }

    /// Row `row`'s tags, by name.
    func tags(_ row: Int) -> [String] {
        let (file, local, map) = row < base.count ? (base, row, nil) : (overlay!, row - base.count, overlayTags)
        return file.tagCodes[Int(file.tagOffsets[local])..<Int(file.tagOffsets[local + 1])].map { tagNames[Int(map?[Int($0)] ?? $0)] }
    }

    /// Row `row`'s length in tokens, all columns.
    func length(_ row: Int) -> Int32 {
        row < base.count ? base.lengths[row] : overlay!.lengths[row - base.count]
    }

    func leaf(_ row: Int) -> UnsafeRawBufferPointer {
        row < base.count ? base.leaf(row) : overlay!.leaf(row - base.count)
    }

    /// Calls `body` with every live row in UTF-8 byte order of its id (the state root's order):
    /// the base's id order without its removed rows, merged with the overlay's.
    func forEachInIDOrder<E: Error>(_ body: (Int) throws(E) -> Void) throws(E) {
        let overlayOrder = overlay?.idOrder ?? UnsafeBufferPointer(start: nil, count: 0)
        var next = 0
        for row in base.idOrder where isLive(Int(row)) {
            let id = base.id(Int(row))
            while next < overlayOrder.count, overlay!.id(Int(overlayOrder[next])).lexicographicallyPrecedes(id) {
                try body(base.count + Int(overlayOrder[next]))
                next += 1
            }
            try body(Int(row))
        }
        while next < overlayOrder.count {
            try body(base.count + Int(overlayOrder[next]))
            next += 1
        }
    }

    /// The live rows' set hash (protocol/state-root.md, "Set hash"), when it is known: computed
    /// by `computeSetHash`, or derived by the delta check that made these rows.
    public var setHash: SetHash? { setHashCache.withLock { $0 } }

    /// Computes the live rows' set hash from their leaves, once (about 0.6 s a million rows on
    /// one core: an expansion of 2 kB a leaf); later calls return it.
    @discardableResult
    public func computeSetHash() -> SetHash {
        if let known = setHash { return known }
        var set = SetHash()
        for row in 0..<slots where isLive(row) { set.add(leaf: leaf(row)) }
        setHashCache.withLock { $0 = set }
        return set
    }

    /// The state root over every live row's leaf, in id order.
    func stateRoot() -> ContentID {
        var root = StateRoot.Accumulator(count: count)
        forEachInIDOrder { row in root.add(leaf: leaf(row)) }
        return root.finalize()
    }

    /// The live row whose id is `id`, by binary search in the base's and the overlay's id orders.
    func row(id: String) -> Int? {
        var id = id
        return id.withUTF8 { id in
            let key = UnsafeRawBufferPointer(id)
            if let overlay, let row = Self.find(key, in: overlay) { return base.count + row }
            if let row = Self.find(key, in: base), isLive(row) { return row }
            return nil
        }
    }

    private static func find(_ id: UnsafeRawBufferPointer, in file: RowFile) -> Int? {
        let order = file.idOrder
        var low = 0, high = order.count
        while low < high {
            let middle = (low + high) / 2
            if file.id(Int(order[middle])).lexicographicallyPrecedes(id) { low = middle + 1 } else { high = middle }
        }
        guard low < order.count, file.id(Int(order[low])).elementsEqual(id) else { return nil }
        return Int(order[low])
    }
}
