import CairnCore
import Foundation
import Synchronization

/// One rows file (`cairn-rows-1`, protocol/data-directory.md "Rows files"): what a `SearchIndex`
/// keeps of every row of one snapshot file — int8 codes, scales, sign bits, rowids, BM25 lengths,
/// scenarios, tags, ids, state-root leaves and the id order — as fixed-width sections of one
/// file, memory-mapped read-only. Nothing is copied at open: a query reads the sections through
/// the mapping, so their pages are the kernel's page cache (file-backed, evictable), not the
/// process's anonymous memory, and opening a million rows costs a header check.
///
/// A `base` file holds every row of the version it was built for (row r = the r-th by rowid);
/// an `overlay` file holds the rows a chain of deltas changed or added since a base, and the
/// base rows they removed (`removed`). Written once by `RowFileWriter`; never changed.
final class RowFile: @unchecked Sendable {
    // @unchecked: the mapping is read-only and unmapped only in deinit, when no one holds self.

    enum Kind: UInt32, Sendable {
        case base = 0
        case overlay = 1
    }

    /// The sections, in file order.
    enum Section: Int, CaseIterable {
        case codes, scales, signs, rowids, lengths, scenarios, leaves, idOrder, tagOffsets, idOffsets
        case tagCodes, idBytes, dictionary, removed
    }

    static let magic = Array("CAIRNRW1".utf8)
    static let formatVersion: UInt32 = 1
    static let headerSize = 4096
    /// Header bytes covered by the checksum stored at `checksumOffset`.
    static let checksumOffset = headerSize - 32

    let kind: Kind
    let dimension: Int
    let count: Int
    /// The version these rows complete (a base: the version it was built from), its state root.
    let version: Int
    let stateRoot: ContentID
    /// An overlay's base: its row count and state root (zero for a base).
    let baseCount: Int
    let baseStateRoot: ContentID?
    let path: String

    /// The file's device and inode, to tell it from another at the same path.
    private let device: UInt64
    private let inode: UInt64
    private let mapping: UnsafeMutableRawPointer
    private let length: Int
    /// Its entry in the table that names the file when a read of the mapping fails.
    private let named: Int?
    private let sections: [Range<Int>]
    /// `evenSample`'s rows, taken on first use.
    private let sampled = Mutex<EvenSample?>(nil)

    /// Maps the file at `path` and checks its header and sections; `.snapshotMalformed` when it
    /// is not a whole rows file of `dimension` values a row, `.io` when it cannot be opened or
    /// mapped now (`cannot`).
    init(path: String, dimension expected: Int) throws(IndexError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Self.cannot("be opened", path, errno) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_size >= Self.headerSize else { throw Self.malformed(path, "is too short") }
        length = Int(info.st_size)
        (device, inode) = (UInt64(info.st_dev), UInt64(info.st_ino))
        let fails = Self.mappingFails
        let mapped = fails ? nil : mmap(nil, length, PROT_READ, MAP_SHARED, descriptor, 0)
        guard let mapped, mapped != MAP_FAILED else { throw Self.cannot("be mapped", path, fails ? ENOMEM : errno) }
        mapping = mapped
        self.path = path
        named = MappedFiles.remember(mapped, count: length, path: path)
        let header = UnsafeRawBufferPointer(start: mapped, count: Self.headerSize)
        // Once every stored property is set, a throw releases a whole object, and `deinit`
        // unmaps: the catch must not unmap too. Twice unmapped, the second call tore down
        // whatever another thread had mapped at that address meanwhile (a crash there).
        var whole = false
        do throws(IndexError) {
            guard Array(header[0..<8]) == Self.magic,
                  header.loadUnaligned(fromByteOffset: 8, as: UInt32.self).littleEndian == Self.formatVersion else {
                throw Self.malformed(path, "is not a rows file of this format")
            }
            let sum = ContentID(hashing: UnsafeRawBufferPointer(rebasing: header[0..<Self.checksumOffset])).bytes
            guard header[Self.checksumOffset...].elementsEqual(sum) else { throw Self.malformed(path, "has a damaged header") }
            func u64(_ offset: Int) -> Int { Int(truncatingIfNeeded: header.loadUnaligned(fromByteOffset: offset, as: UInt64.self).littleEndian) }
            func digest(_ offset: Int) -> ContentID { ContentID(bytes: Array(header[offset..<offset + 32]))! }
            guard let kind = Kind(rawValue: header.loadUnaligned(fromByteOffset: 12, as: UInt32.self).littleEndian) else {
                throw Self.malformed(path, "is of an unknown kind")
            }
            self.kind = kind
            dimension = Int(header.loadUnaligned(fromByteOffset: 16, as: UInt32.self).littleEndian)
            count = u64(24)
            version = u64(32)
            stateRoot = digest(40)
            baseCount = u64(72)
            baseStateRoot = kind == .overlay ? digest(80) : nil
            guard dimension == expected, count >= 0, count < Int(Int32.max), baseCount >= 0 else {
                throw Self.malformed(path, "holds rows of dimension \(dimension); the snapshot's is \(expected)")
            }
            var sections: [Range<Int>] = []
            for section in Section.allCases {
                let start = u64(Self.sectionTable + section.rawValue * 16), size = u64(Self.sectionTable + section.rawValue * 16 + 8)
                guard start >= Self.headerSize, size >= 0, start <= length, size <= length - start, start % 8 == 0 else {
                    throw Self.malformed(path, "has a section outside the file")
                }
                sections.append(start..<start + size)
            }
            self.sections = sections
            whole = true
            let layout = Layout(count: count, dimension: dimension)
            for section in Section.allCases {
                guard let size = layout.fixedSize(section) else { continue }
                guard sections[section.rawValue].count == size else { throw Self.malformed(path, "has a section of the wrong size") }
            }
            guard sections[Section.tagCodes.rawValue].count % 4 == 0, sections[Section.removed.rawValue].count % 4 == 0,
                  kind == .overlay || sections[Section.removed.rawValue].isEmpty else {
                throw Self.malformed(path, "has a section of the wrong size")
            }
            try checkOffsets()
        } catch {
            if !whole {
                MappedFiles.forget(named)
                munmap(mapped, length)
            }
            throw error
        }
    }

    deinit {
        MappedFiles.forget(named)
        munmap(mapping, length)
    }

    /// Whether `path` names this same file (not a copy, not another at that path).
    func isFile(at path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }

    /// Where the section table starts in the header: 14 × (offset, size), u64 each.
    static let sectionTable = 112

    /// A rows file that cannot be opened or mapped now (too many open files, no memory or
    /// address space left, as a small device's limits give at a million rows): `.io`, outside
    /// the file's bytes (`IndexError.isEnvironmental`), so that the version is kept and opened
    /// again later, not scanned row by row and then, failing the same way, dropped as damaged.
    /// One that is not there, not a file, or not this process's to read (a data directory
    /// copied under another user: written anew by the scan, as a rows file can be) is
    /// `.snapshotMalformed`.
    private static func cannot(_ what: String, _ path: String, _ code: Int32) -> IndexError {
        let reason = String(cString: strerror(code))
        guard ![ENOENT, ENOTDIR, EISDIR, ENODEV, EACCES, EPERM, ELOOP].contains(code) else {
            return malformed(path, "cannot \(what): \(reason)")
        }
        return IndexError(.io, "the rows file \(path) cannot \(what) now: \(reason)", cause: CannotOpenNow())
    }

    /// The cause of `cannot`'s `.io`: not a folder that cannot be written, which a scan's
    /// rows file in TMPDIR would get around (`Snapshot.scanWritingRows`).
    struct CannotOpenNow: Error {}

    /// Test hook: `CAIRN_TEST_ROWS_MAP_FAILS=1` fails every mapping of a rows file with ENOMEM,
    /// a fault no test can cause on time (the memory limit of a small device at start-up, or
    /// during an install); an absolute path instead fails them while a file is there, so that
    /// a test can start cairnd first.
    private static let mappingFailsSetting = ProcessInfo.processInfo.environment["CAIRN_TEST_ROWS_MAP_FAILS"]

    private static var mappingFails: Bool {
        guard let setting = mappingFailsSetting else { return false }
        return setting == "1" || (setting.hasPrefix("/") && access(setting, F_OK) == 0)
    }

    private static func malformed(_ path: String, _ problem: String) -> IndexError {
        IndexError(.snapshotMalformed, "the rows file \(path) \(problem)")
    }

    /// The offsets sections must ascend and end inside their byte sections, and the id order
    /// and removed rows must name rows of the file (each checked once here, so that a reader
    /// never leaves the mapping).
    private func checkOffsets() throws(IndexError) {
        func ascending(_ offsets: UnsafeBufferPointer<some FixedWidthInteger>, end: Int) -> Bool {
            // `Int(exactly:)`: a u64 with its top bit set (a flipped bit) is refused, not a trap.
            guard offsets.first == 0, Int(exactly: offsets[offsets.count - 1]) == end else { return false }
            for index in 1..<offsets.count where offsets[index] < offsets[index - 1] { return false }
            return true
        }
        guard ascending(tagOffsets, end: tagCodes.count), ascending(idOffsets, end: idBytes.count),
              idOrder.allSatisfy({ Int($0) < count }), removed.allSatisfy({ Int($0) < baseCount }) else {
            throw Self.malformed(path, "has offsets or row numbers outside its sections")
        }
        // SQLite's rowids are positive, and a base's ascend (it is searched by halving): one
        // pass, as this runs at every start (8 MB at a million rows).
        let ascending = kind == .base
        var previous: Int64 = 0
        for rowid in rowids {
            guard rowid >= 1, !ascending || rowid > previous else {
                throw Self.malformed(path, "has rowids that are not positive or, in a base, not ascending")
            }
            previous = rowid
        }
    }

    private func buffer<T>(_ section: Section, as type: T.Type) -> UnsafeBufferPointer<T> {
        let range = sections[section.rawValue]
        return UnsafeBufferPointer(start: (mapping + range.lowerBound).assumingMemoryBound(to: T.self),
                                   count: range.count / MemoryLayout<T>.stride)
    }

    /// `dimension` codes a row, row r at r × dimension: the vector ≈ scale × codes.
    var codes: UnsafeBufferPointer<Int8> { buffer(.codes, as: Int8.self) }
    var scales: UnsafeBufferPointer<Float> { buffer(.scales, as: Float.self) }
    /// `Layout.signWords(dimension)` words a row (`cairn_sign_bits_i8`).
    var signs: UnsafeBufferPointer<UInt64> { buffer(.signs, as: UInt64.self) }
    var rowids: UnsafeBufferPointer<Int64> { buffer(.rowids, as: Int64.self) }
    /// Each row's length in tokens, all columns (FTS5's `%_docsize`), for BM25.
    var lengths: UnsafeBufferPointer<Int32> { buffer(.lengths, as: Int32.self) }
    /// Each row's scenario as an index into `dictionary.scenarios`, -1 for none.
    var scenarios: UnsafeBufferPointer<Int32> { buffer(.scenarios, as: Int32.self) }
    /// 32 bytes a row: its state-root leaf.
    var leaves: UnsafeRawBufferPointer { UnsafeRawBufferPointer(buffer(.leaves, as: UInt8.self)) }
    /// The rows in UTF-8 byte order of their ids.
    var idOrder: UnsafeBufferPointer<UInt32> { buffer(.idOrder, as: UInt32.self) }
    /// Row r's tags are `tagCodes[tagOffsets[r] ..< tagOffsets[r + 1]]`, indexes into `dictionary.tags`.
    var tagOffsets: UnsafeBufferPointer<UInt32> { buffer(.tagOffsets, as: UInt32.self) }
    var tagCodes: UnsafeBufferPointer<UInt32> { buffer(.tagCodes, as: UInt32.self) }
    /// Row r's id is the UTF-8 bytes `idBytes[idOffsets[r] ..< idOffsets[r + 1]]`.
    var idOffsets: UnsafeBufferPointer<UInt64> { buffer(.idOffsets, as: UInt64.self) }
    var idBytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(buffer(.idBytes, as: UInt8.self)) }
    /// An overlay's removed base rows, ascending.
    var removed: UnsafeBufferPointer<UInt32> { buffer(.removed, as: UInt32.self) }

    /// Where the id offsets section starts in the file (for tests that damage it).
    func sectionOffset(_ section: Section) -> Int { sections[section.rawValue].lowerBound }

    /// Whether the id order is the rows' own order (0, 1, 2, …: a full snapshot's rows are
    /// written in id order), so that a run of rows in id order is one block of each section.
    var idOrderIsRowOrder: Bool {
        let order = idOrder
        for index in order.indices where order[index] != UInt32(index) { return false }
        return true
    }

    /// Row r's id bytes.
    func id(_ row: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: idBytes[Int(idOffsets[row])..<Int(idOffsets[row + 1])])
    }

    func leaf(_ row: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: leaves[row * 32..<(row + 1) * 32])
    }

    /// Rows spread evenly over the file and their codes and scales, copied into one block.
    struct EvenSample: Sendable {
        /// Ascending row numbers.
        let rows: [Int32]
        let codes: [Int8]
        let scales: [Float]
    }

    /// `size` rows spread evenly over the file (row s × count / size for s in 0..<size; every
    /// row when `size` is at least the count), copied once and kept while the file is mapped.
    /// Every version served over this file as its base draws the dense moments' sample from
    /// them (`SearchIndex`), so a version that a delta derives reads none of these rows again:
    /// at a million rows they are 16,384 reads spread over 384 MB of codes.
    func evenSample(_ size: Int) -> EvenSample {
        let size = min(max(0, size), count)
        return sampled.withLock { kept in
            if let kept, kept.rows.count == size { return kept }
            let rows = (0..<size).map { Int32($0 * count / size) }
            let (codes, scales) = copy(rows.lazy.map(Int.init))
            let sample = EvenSample(rows: rows, codes: codes, scales: scales)
            kept = sample
            return sample
        }
    }

    /// The codes and scales of `rows`, in that order, copied into one block each.
    func copy(_ rows: some Collection<Int>) -> (codes: [Int8], scales: [Float]) {
        let d = dimension, codes = self.codes, scales = self.scales
        var copied: [Int8] = []
        copied.reserveCapacity(rows.count * d)
        for row in rows { copied += codes[row * d ..< (row + 1) * d] }
        return (copied, rows.map { scales[$0] })
    }

    /// The names the scenario and tag codes index.
    func dictionary() throws(IndexError) -> Dictionary {
        let bytes = buffer(.dictionary, as: UInt8.self)
        guard let decoded = try? JSONDecoder().decode(Dictionary.self, from: Data(buffer: bytes)) else {
            throw Self.malformed(path, "has a malformed dictionary")
        }
        guard scenarios.allSatisfy({ $0 >= -1 && Int($0) < decoded.scenarios.count }),
              tagCodes.allSatisfy({ Int($0) < decoded.tags.count }) else {
            throw Self.malformed(path, "has codes outside its dictionary")
        }
        return decoded
    }

    struct Dictionary: Codable, Equatable, Sendable {
        var scenarios: [String] = []
        var tags: [String] = []
    }

    /// Where each section of a file of `count` rows goes.
    struct Layout {
        let count: Int
        let dimension: Int

        static func signWords(_ dimension: Int) -> Int { (dimension + 63) / 64 }

        /// A fixed section's size in bytes; nil for the variable ones.
        func fixedSize(_ section: Section) -> Int? {
            switch section {
            case .codes: count * dimension
            case .scales, .lengths, .scenarios, .idOrder: count * 4
            case .signs: count * Self.signWords(dimension) * 8
            case .rowids: count * 8
            case .leaves: count * 32
            case .tagOffsets: (count + 1) * 4
            case .idOffsets: (count + 1) * 8
            case .tagCodes, .idBytes, .dictionary, .removed: nil
            }
        }

        /// The fixed sections' offsets, each 64-byte aligned after the header, and where the
        /// variable sections may start.
        func fixedOffsets() -> (offsets: [Section: Int], end: Int) {
            var offsets: [Section: Int] = [:]
            var next = RowFile.headerSize
            for section in Section.allCases {
                guard let size = fixedSize(section) else { continue }
                offsets[section] = next
                next = Self.aligned(next + size)
            }
            return (offsets, next)
        }

        static func aligned(_ offset: Int) -> Int { (offset + 63) & ~63 }
    }
}
