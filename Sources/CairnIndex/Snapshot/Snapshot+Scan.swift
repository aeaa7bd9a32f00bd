public import CairnCore
import Foundation

extension Snapshot {
    /// What a scan checks while it writes the rows file.
    public enum RowCheck: Sendable {
        /// Each row's state-root leaf from its stored hashes, and the state root over them
        /// against the meta's: an installed file whose rows files are missing, or a delta's
        /// result, whose rows the applying transaction checked.
        case storedHashes
        /// Every row's three hashes recomputed from its data and compared with the stored ones,
        /// then the state root over them: a full snapshot (protocol/snapshot.md, "Verification").
        case recomputedHashes
    }

    /// One pass over every row in rowid order that writes the rows file beside the snapshot at
    /// `path` (`IndexContents.baseFile`) and checks the state root as `check` says against the
    /// meta's and `expectedStateRoot` (the signed manifest's). Throws `.hashMismatch`,
    /// `.dimensionMismatch`, `.stateRootMismatch`, or `.diskFull` / `.io` for the rows file.
    public static func scan(at path: String, check: RowCheck, expectedStateRoot: ContentID? = nil,
                            durable: Bool = false) throws(IndexError) -> IndexContents {
        try scan(at: path, check: check, expectedStateRoot: expectedStateRoot, durable: durable, rowsPath: nil)
    }

    static func scan(at path: String, check: RowCheck, expectedStateRoot: ContentID?, durable: Bool,
                     rowsPath: String?) throws(IndexError) -> IndexContents {
        let scan = try RowScan(at: path, check: check, parts: 1, rowsPath: rowsPath)
        return try scan.finish([scan.part(0)], expectedStateRoot: expectedStateRoot, durable: durable)
    }

    /// The rows files of a verified file that has none for its version (`SearchIndex` opening
    /// it): one pass over its rows (leaves from the stored hashes, the state root checked against
    /// the meta's) writes the base beside it, in place of any rows files of another version there;
    /// when its folder cannot be written (or its disk is full), to a temporary file removed once
    /// mapped.
    static func scanWritingRows(at path: String) throws(IndexError) -> IndexContents {
        unlink(IndexContents.overlayPath(beside: path))
        do {
            // Durable: trusted at the next start by its header, it must not be renamed into
            // place before its sections are on the disk.
            return try scan(at: path, check: .storedHashes, durable: true)
        } catch where (error.code == .io || error.code == .diskFull) && !(error.cause is RowFile.CannotOpenNow) {
            // (A rows file written but not mapped now, out of memory: a second scan into TMPDIR,
            // on a small device its memory, would fail the same way.)
            removeAbandonedTemporaryRows()
            let temporary = (NSTemporaryDirectory() as NSString).appendingPathComponent("cairn-rows-\(getpid())-\(UUID().uuidString).bin")
            defer { unlink(temporary) }
            return try scan(at: path, check: .storedHashes, expectedStateRoot: nil, durable: false, rowsPath: temporary)
        }
    }

    /// Removes the temporary rows files (`cairn-rows-<pid>-…` in TMPDIR) of processes that no
    /// longer run: a cairnd killed while it wrote or mapped one. On a tmpfs they hold memory.
    static func removeAbandonedTemporaryRows() {
        let folder = NSTemporaryDirectory()
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where name.hasPrefix("cairn-rows-") {
            guard let pid = Int32(name.dropFirst("cairn-rows-".count).prefix { $0 != "-" }), pid != getpid(),
                  kill(pid, 0) != 0, errno == ESRCH else { continue }
            unlink((folder as NSString).appendingPathComponent(name))
        }
    }

    /// A scan of one snapshot file that writes its rows file: `part(_:)` for each of `parts`
    /// equal row ranges (on as many threads at once: each writes its own rows), then `finish`.
    public final class RowScan: Sendable {
        let path: String
        let meta: SnapshotMeta
        let check: RowCheck
        let readingDirect: Bool
        /// Parts the rows are cut into: one unless the rowids run without gaps (a full
        /// snapshot's run 1…n), so that each part knows its rows' numbers.
        public let parts: Int
        private let firstRowid: Int64
        private let writer: RowFileWriter

        /// Opens the file, reads its meta, and starts the rows file beside it.
        /// `readingDirect`: the rows are read around the page cache (a file just written so).
        public init(at path: String, check: RowCheck, parts wanted: Int, rowsPath: String? = nil,
                    readingDirect: Bool = false) throws(IndexError) {
            let db = try Database(path: path, mode: .readOnly(immutable: false))
            let meta = try Snapshot.meta(in: db)
            let bounds = try db.prepare("SELECT min(rowid), max(rowid) FROM chunks")
            var first: Int64 = 1, contiguous = false
            if try bounds.step(), !bounds.isNull(at: 0) {
                first = bounds.int64(at: 0)
                contiguous = bounds.int64(at: 1) - first + 1 == Int64(meta.chunkCount)
            }
            self.path = path
            self.meta = meta
            self.check = check
            self.readingDirect = readingDirect
            firstRowid = first
            parts = contiguous && meta.chunkCount >= 2 * wanted ? max(1, wanted) : 1
            writer = try RowFileWriter(path: rowsPath ?? IndexContents.basePath(beside: path), count: meta.chunkCount,
                                       dimension: meta.dimension)
        }

        /// What one part read besides the rows it wrote: ids, scenarios, tags, leaves.
        public struct Part: Sendable {
            var rows = 0
            var idBytes: [UInt8] = []
            var idEnds: [UInt64] = []
            var scenarioNames: [String] = []
            var scenarios: [Int32] = []
            var tagNames: [String] = []
            var tagCodes: [UInt32] = []
            var tagEnds: [UInt32] = []
            var leaves: [UInt8] = []
            /// The set hash of its rows' leaves (protocol/state-root.md, "Set hash").
            var setHash = SetHash()
        }

        /// The rows of part `part` (from 0): hashed as the check says and written to the rows file.
        public func part(_ part: Int) throws(IndexError) -> Part {
            let n = meta.chunkCount
            let (low, high) = (n * part / parts, n * (part + 1) / parts)
            // A large full snapshot's file was just written past the page cache (direct I/O),
            // and on a small device it cannot stay cached: its rows are read direct, megabytes
            // at a time. Otherwise (a smaller snapshot, a delta's result, or an installed file),
            // the pages are read through a mapping instead of copied into SQLite's cache.
            let db = try Database(path: path, mode: readingDirect ? .streaming : .readOnly(immutable: false))
            if !readingDirect { try db.exec("PRAGMA mmap_size = \(Snapshot.scanMapSize)") }
            // One column layout for every check; what a check does not need is selected as NULL.
            let text = check == .recomputedHashes ? "title, content, scenario, tags, source" : "NULL, NULL, scenario, tags, NULL"
            let where_ = parts > 1 ? "WHERE rowid BETWEEN ?1 AND ?2 " : ""
            let statement = try db.prepare("SELECT rowid, id, \(text), embedding, content_hash, metadata_hash, embedding_hash "
                + "FROM chunks \(where_)ORDER BY rowid")
            let sizes = try db.prepare("SELECT id, sz FROM chunks_fts_docsize \(where_)ORDER BY id")
            if parts > 1 {
                for query in [statement, sizes] {
                    try query.bind(firstRowid + Int64(low), at: 1)
                    try query.bind(firstRowid + Int64(high) - 1, at: 2)
                }
            }
            var result = Part()
            result.idEnds.reserveCapacity(high - low)
            result.scenarios.reserveCapacity(high - low)
            result.tagEnds.reserveCapacity(high - low)
            result.leaves.reserveCapacity((high - low) * 32)
            var scenarioCode: [String: Int32] = [:], tagCode: [String: UInt32] = [:]
            var batch = RowFileWriter.Batch()
            var written = low
            var sizeRowid: Int64 = .min, sizeTokens: Int32 = -1, sizesLeft = true
            var rowCheck = StoredRowCheck()
            var setHash = SetHash()
            let empty = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
            while try statement.step() {
                guard written + batch.count < high else {
                    throw IndexError(.snapshotMalformed, "the snapshot holds more chunks than its meta says")
                }
                let rowid = statement.int64(at: 0)
                let id = statement.string(at: 1) ?? ""
                let scenario = statement.string(at: 4)
                let tags = try ChunkRow.decodeTags(statement.string(at: 5) ?? "[]")
                // The row's size record, by a merge of the two rowid-ordered reads.
                while sizesLeft, sizeRowid < rowid {
                    // (Stepped no further once done: SQLite would start the statement again.)
                    guard try sizes.step() else { sizesLeft = false; break }
                    sizeRowid = sizes.int64(at: 0)
                    sizeTokens = try sizes.withBlob(at: 1, DocumentLengths.total)
                }
                let length = sizeRowid == rowid ? sizeTokens : -1
                try statement.withBlob(at: 7) { (bytes) throws(IndexError) in
                    guard bytes.count == meta.dimension * 4 else {
                        throw IndexError(.dimensionMismatch, "a stored vector does not have the snapshot's dimension")
                    }
                    batch.append(vector: bytes, rowid: rowid, length: length)
                    let leaf = switch check {
                    case .storedHashes:
                        try storedRecord(id: id, from: statement, first: 8).leaf
                    case .recomputedHashes:
                        // The text columns' bytes as stored, hashed without building a Chunk; the
                        // embedding column is the vector's little-endian float32 bytes, exactly
                        // what the embedding hash covers.
                        try Snapshot.leaf(rowCheck.check(
                            id: id, title: statement.unsafeUTF8(at: 2) ?? empty, content: statement.unsafeUTF8(at: 3) ?? empty,
                            scenario: statement.unsafeUTF8(at: 4), tags: tags, source: statement.unsafeUTF8(at: 6), embedding: bytes,
                            storedHashes: (statement.unsafeUTF8(at: 8), statement.unsafeUTF8(at: 9), statement.unsafeUTF8(at: 10))))
                    }
                    result.leaves += leaf.bytes
                    // The set hash as the rows pass (a delta of format 2 is checked from it), so
                    // its expansion runs on this part's thread while the next rows are read.
                    setHash.add(leaf)
                }
                result.idBytes += id.utf8
                result.idEnds.append(UInt64(result.idBytes.count))
                if let scenario {
                    let code = scenarioCode[scenario] ?? Int32(result.scenarioNames.count)
                    if code == Int32(result.scenarioNames.count) {
                        scenarioCode[scenario] = code
                        result.scenarioNames.append(scenario)
                    }
                    result.scenarios.append(code)
                } else {
                    result.scenarios.append(-1)
                }
                for tag in Set(tags).sorted() {
                    let code = tagCode[tag] ?? UInt32(result.tagNames.count)
                    if code == UInt32(result.tagNames.count) {
                        tagCode[tag] = code
                        result.tagNames.append(tag)
                    }
                    result.tagCodes.append(code)
                }
                result.tagEnds.append(UInt32(result.tagCodes.count))
                if batch.count == Self.batchRows {
                    try writer.write(first: written, batch: batch)
                    written += batch.count
                    batch.removeAll()
                }
            }
            if batch.count > 0 {
                try writer.write(first: written, batch: batch)
                written += batch.count
            }
            guard written == high else {
                throw IndexError(.stateRootMismatch, "the snapshot holds a different number of chunks than its meta says")
            }
            result.rows = high - low
            result.setHash = setHash
            return result
        }

        /// Rows a part writes at a time.
        static let batchRows = 1024

        /// Joins the parts (in part order): the ids, scenarios and tags under one numbering, the
        /// id order, the state root over the leaves in that order against the meta's and
        /// `expectedStateRoot`; then writes the rest of the rows file (fsynced when `durable`)
        /// and opens it.
        ///
        /// `parts` is consumed: each part's arrays are let go once joined (at a million rows
        /// the leaves alone are 32 MB, and the ids as much again), and a single part's are taken
        /// over whole rather than copied.
        public func finish(_ parts: consuming [Part], expectedStateRoot: ContentID?, durable: Bool) throws(IndexError) -> IndexContents {
            guard parts.count == self.parts, parts.reduce(0, { $0 + $1.rows }) == meta.chunkCount else {
                throw IndexError(.stateRootMismatch, "the snapshot holds a different number of chunks than its meta says")
            }
            var setHash = SetHash()
            for index in parts.indices { setHash.add(parts[index].setHash) }
            var rest = RowFileWriter.Rest()
            var scenarioCode: [String: Int32] = [:], tagCode: [String: UInt32] = [:]
            let single = parts.count == 1
            if !single {
                rest.idBytes.reserveCapacity(parts.reduce(0) { $0 + $1.idBytes.count })
                rest.leaves.reserveCapacity(meta.chunkCount * 32)
            }
            rest.idOffsets.reserveCapacity(meta.chunkCount + 1)
            rest.tagOffsets.reserveCapacity(meta.chunkCount + 1)
            rest.scenarios.reserveCapacity(meta.chunkCount)
            for index in parts.indices {
                let part = parts[index]
                parts[index] = Part()  // `part` holds its arrays for this turn only
                let scenarios = part.scenarioNames.map { name in
                    if let code = scenarioCode[name] { return code }
                    rest.dictionary.scenarios.append(name)
                    scenarioCode[name] = Int32(rest.dictionary.scenarios.count - 1)
                    return Int32(rest.dictionary.scenarios.count - 1)
                }
                let tags = part.tagNames.map { name in
                    if let code = tagCode[name] { return code }
                    rest.dictionary.tags.append(name)
                    tagCode[name] = UInt32(rest.dictionary.tags.count - 1)
                    return UInt32(rest.dictionary.tags.count - 1)
                }
                let idBase = UInt64(rest.idBytes.count), tagBase = UInt32(rest.tagCodes.count)
                if single { rest.idBytes = part.idBytes } else { rest.idBytes += part.idBytes }
                rest.idOffsets += part.idEnds.lazy.map { $0 + idBase }
                rest.scenarios += part.scenarios.lazy.map { $0 < 0 ? -1 : scenarios[Int($0)] }
                rest.tagCodes += part.tagCodes.lazy.map { tags[Int($0)] }
                rest.tagOffsets += part.tagEnds.lazy.map { $0 + tagBase }
                if single { rest.leaves = part.leaves } else { rest.leaves += part.leaves }
            }
            rest.idOrder = Self.idOrder(bytes: rest.idBytes, offsets: rest.idOffsets)

            var root = StateRoot.Accumulator(count: meta.chunkCount)
            rest.leaves.withUnsafeBytes { leaves in
                for row in rest.idOrder { root.add(leaf: UnsafeRawBufferPointer(rebasing: leaves[Int(row) * 32..<Int(row) * 32 + 32])) }
            }
            let computed = root.finalize()
            guard computed == meta.stateRoot else {
                throw IndexError(.stateRootMismatch, "the snapshot's recomputed state root or chunk count differs from its meta")
            }
            if let expectedStateRoot, expectedStateRoot != computed {
                throw IndexError(.stateRootMismatch, "the snapshot's state root differs from the expected one")
            }
            try writer.finish(rest, identity: .init(kind: .base, version: meta.version, stateRoot: meta.stateRoot), durable: durable)
            let contents = try IndexContents(meta: meta, base: RowFile(path: writer.path, dimension: meta.dimension), overlay: nil)
            contents.setHashCache.withLock { $0 = setHash }
            return contents
        }

        /// The rows in UTF-8 byte order of their ids: as they are when the ids already ascend (a
        /// snapshot written whole inserts its rows in id order), else sorted; refused when an id
        /// repeats.
        static func idOrder(bytes: [UInt8], offsets: [UInt64]) -> [UInt32] {
            let n = offsets.count - 1
            return bytes.withUnsafeBytes { bytes in
                func id(_ row: Int) -> UnsafeRawBufferPointer {
                    UnsafeRawBufferPointer(rebasing: bytes[Int(offsets[row])..<Int(offsets[row + 1])])
                }
                let ascending = n < 2 || (1..<n).allSatisfy { id($0 - 1).lexicographicallyPrecedes(id($0)) }
                return ascending ? (0..<UInt32(n)).map { $0 } : (0..<UInt32(n)).sorted { id(Int($0)).lexicographicallyPrecedes(id(Int($1))) }
            }
        }
    }

    /// The most of a file a scan maps into memory (the rest, if any, is read as usual).
    static let scanMapSize = 1 << 31 - 1
}
