import CairnCore
import CEncoderKernels
import Foundation

/// What a `SearchIndex` keeps in memory for one snapshot file: every vector as int8 codes in one
/// contiguous n × d matrix with a scale per row (row i = the i-th chunk by rowid; a quarter of
/// the float32 vectors' memory), beside each row's id, rowid, scenario and tags, and each row's
/// token count for BM25. The float32 vectors stay in the file, which rescoring reads.
///
/// Loaded in one pass over the rows (`Snapshot.scan`); the pass that verifies a new version
/// loads it too, so a device opens the version it just verified without reading every row
/// again (`SearchIndex(path:configuration:contents:)`). Immutable.
public final class IndexContents: Sendable {
    public let meta: SnapshotMeta
    /// The file it was read from; a `SearchIndex` accepts the contents only for that same file.
    let file: FileIdentity
    let rows: Rows
    let lengths: DocumentLengths

    /// Chunks loaded.
    public var count: Int { rows.ids.count }

    init(meta: SnapshotMeta, file: FileIdentity, rows: Rows, lengths: DocumentLengths) {
        self.meta = meta
        self.file = file
        self.rows = rows
        self.lengths = lengths
    }

    /// The rows as they are read, in rowid order: vectors, ids, rowids, scenarios, tags.
    struct Rows: Sendable {
        /// Row r's vector ≈ `scales[r]` × `codes[r·d ..< (r+1)·d]` (`cairn_quantize_row_i8`).
        var codes: [Int8] = []
        var scales: [Float] = []
        var ids: [String] = []
        var rowids: [Int64] = []
        var rowForRowid: [Int64: Int] = [:]
        /// Each row's scenario as a small integer (-1 for none), compared per query.
        var scenarioCodes: [Int32] = []
        var scenarioCode: [String: Int32] = [:]
        var tags: [Set<String>] = []
        /// Each row's state-root leaf (`StateRoot.Record.leaf`) when the scan read or recomputed
        /// the hashes, else empty: a delta to these rows is then checked without reading them.
        var leaves: [ContentID] = []
        /// The rows' positions in UTF-8 byte order of their ids, when they have leaves (else
        /// empty): a delta is checked, and the new rows derived, by merging in this order, the
        /// order of the state root and of the file's id index. Set by whoever loads rows with
        /// leaves: `Snapshot.combine` (`orderIDs()`) and `CheckedDelta.contents(ofFile:…)` (from the
        /// id order it reads).
        var idOrder: [Int32] = []

        init(capacity: Int, dimension: Int) {
            codes.reserveCapacity(capacity * dimension)
            scales.reserveCapacity(capacity)
            ids.reserveCapacity(capacity)
            rowids.reserveCapacity(capacity)
            rowForRowid.reserveCapacity(capacity)
            scenarioCodes.reserveCapacity(capacity)
            tags.reserveCapacity(capacity)
        }

        /// Sets `idOrder`: the positions as they are when the ids already ascend (a snapshot
        /// written whole inserts its rows in id order), else sorted.
        mutating func orderIDs() {
            let ids = self.ids
            let ascending = zip(ids, ids.dropFirst()).allSatisfy { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            idOrder = ascending ? Array(0..<Int32(ids.count))
                : (0..<Int32(ids.count)).sorted { ids[Int($0)].utf8.lexicographicallyPrecedes(ids[Int($1)].utf8) }
        }

        /// Reserves room for one leaf per row (a scan that keeps them).
        mutating func reserveLeaves(_ capacity: Int) { leaves.reserveCapacity(capacity) }

        /// Appends one row; `embedding` holds exactly `dimension` little-endian float32 values.
        mutating func append(rowid: Int64, id: String, scenario: String?, tags: [String], embedding: UnsafeRawBufferPointer) {
            append(rowid: rowid, id: id, scenario: scenario, tags: Set(tags), embedding: embedding)
        }

        mutating func append(rowid: Int64, id: String, scenario: String?, tags: Set<String>, embedding: UnsafeRawBufferPointer) {
            appendRow(rowid: rowid, id: id, scenario: scenario, tags: tags)
            appendVector(embedding)
        }

        /// Appends one row's codes and scale; `embedding` holds little-endian float32 values.
        mutating func appendVector(_ embedding: UnsafeRawBufferPointer) {
            let dimension = embedding.count / 4
            var scale: Float = 0
            codes.append(contentsOf: repeatElement(0, count: dimension))
            codes.withUnsafeMutableBufferPointer { buffer in
                cairn_quantize_row_i8(embedding.baseAddress, Int32(dimension), buffer.baseAddress! + buffer.count - dimension, &scale)
            }
            scales.append(scale)
        }

        /// `appendVector` for a vector in memory.
        mutating func appendVector(_ vector: [Float]) {
            #if _endian(little)
            vector.withUnsafeBytes { appendVector($0) }
            #else
            let bytes = vector.flatMap { value in withUnsafeBytes(of: value.bitPattern.littleEndian, Array.init) }
            bytes.withUnsafeBytes { appendVector($0) }
            #endif
        }

        /// Appends one row's id, rowid, scenario and tags; its vector goes into `matrix` apart.
        mutating func appendRow(rowid: Int64, id: String, scenario: String?, tags: Set<String>) {
            rowForRowid[rowid] = rowids.count
            rowids.append(rowid)
            appendRow(id: id, scenario: scenario, tags: tags)
        }

        /// Sets every row's rowid (rows appended without: `appendRow(id:scenario:tags:)`).
        mutating func place(rowids: [Int64]) {
            self.rowids = rowids
            rowForRowid = [:]
            rowForRowid.reserveCapacity(rowids.count)
            for (row, rowid) in rowids.enumerated() { rowForRowid[rowid] = row }
        }

        /// Appends one row's id, scenario and tags without its rowid (`place(rowids:)` sets them).
        mutating func appendRow(id: String, scenario: String?, tags: Set<String>) {
            ids.append(id)
            if let scenario {
                let code = scenarioCode[scenario, default: Int32(scenarioCode.count)]
                scenarioCode[scenario] = code
                scenarioCodes.append(code)
            } else {
                scenarioCodes.append(-1)
            }
            self.tags.append(tags)
        }

        /// Appends rows read after these (higher rowids), their scenario codes renumbered.
        mutating func append(contentsOf other: Rows) {
            let offset = rowids.count
            for (rowid, row) in other.rowForRowid { rowForRowid[rowid] = offset + row }
            rowids += other.rowids
            ids += other.ids
            let names = Dictionary(uniqueKeysWithValues: other.scenarioCode.map { ($1, $0) })
            for code in other.scenarioCodes {
                guard let name = names[code] else {
                    scenarioCodes.append(-1)
                    continue
                }
                let merged = scenarioCode[name, default: Int32(scenarioCode.count)]
                scenarioCode[name] = merged
                scenarioCodes.append(merged)
            }
            tags += other.tags
            leaves += other.leaves
            codes += other.codes
            scales += other.scales
        }
    }
}

/// A file's identity while it exists (device, inode, size, modification time): a rename keeps
/// it, another file at the same path has another.
struct FileIdentity: Equatable, Sendable {
    let device: UInt64
    let inode: UInt64
    let size: Int64
    let modified: Int64

    init(path: String) throws(IndexError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw IndexError(.sqlite, "cannot stat the snapshot file: \(String(cString: strerror(errno)))")
        }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modified = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
    }
}
