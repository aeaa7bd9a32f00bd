import CairnCore
import CEncoderKernels
import Foundation

/// Writes one rows file (`RowFile`) of a known number of rows: the fixed sections a batch of
/// rows at a time, from as many threads as there are parts (`write(first:batch:)`, each batch at
/// its rows' offsets), then the variable sections and the header (`finish`). The file is
/// written under a temporary name beside `path` and renamed to it by `finish`, so a reader never
/// sees half of one; a writer dropped without `finish` removes its temporary file.
final class RowFileWriter: @unchecked Sendable {
    // @unchecked: the descriptor is only used with pwrite at disjoint offsets (batches of
    // distinct rows), and `finish` runs after every batch has been written.

    let path: String
    let count: Int
    let dimension: Int
    private let temporary: String
    private let descriptor: Int32
    private let offsets: [RowFile.Section: Int]
    private let variableStart: Int
    private var finished = false

    init(path: String, count: Int, dimension: Int) throws(IndexError) {
        self.path = path
        self.count = count
        self.dimension = dimension
        temporary = path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let layout = RowFile.Layout(count: count, dimension: dimension)
        (offsets, variableStart) = layout.fixedOffsets()
        descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw Self.failure("cannot create \(temporary)") }
        guard ftruncate(descriptor, off_t(variableStart)) == 0 else {
            let error = Self.failure("cannot size \(temporary)")
            close(descriptor)
            unlink(temporary)
            throw error
        }
    }

    deinit {
        close(descriptor)
        if !finished { unlink(temporary) }
    }

    /// What a write failure is refused as: a full disk (or file-size limit) says so.
    private static func failure(_ what: String) -> IndexError {
        let full = errno == ENOSPC || errno == EFBIG || errno == EDQUOT
        return IndexError(full ? .diskFull : .io, "\(what): \(String(cString: strerror(errno)))")
    }

    /// The fixed per-row sections of consecutive rows, filled by a scan or a delta.
    struct Batch {
        var codes: [Int8] = []
        var scales: [Float] = []
        var signs: [UInt64] = []
        var rowids: [Int64] = []
        var lengths: [Int32] = []
        var count: Int { scales.count }

        mutating func removeAll() {
            codes.removeAll(keepingCapacity: true)
            scales.removeAll(keepingCapacity: true)
            signs.removeAll(keepingCapacity: true)
            rowids.removeAll(keepingCapacity: true)
            lengths.removeAll(keepingCapacity: true)
        }

        /// Appends one row: its float32 vector (little-endian bytes) quantized, its signs, rowid
        /// and length.
        mutating func append(vector: UnsafeRawBufferPointer, rowid: Int64, length: Int32) {
            let dimension = vector.count / 4
            var scale: Float = 0
            codes.append(contentsOf: repeatElement(0, count: dimension))
            let words = RowFile.Layout.signWords(dimension)
            signs.append(contentsOf: repeatElement(0, count: words))
            codes.withUnsafeMutableBufferPointer { codes in
                let row = codes.baseAddress! + codes.count - dimension
                cairn_quantize_row_i8(vector.baseAddress, Int32(dimension), row, &scale)
                signs.withUnsafeMutableBufferPointer { signs in
                    cairn_sign_bits_i8(row, 0, 1, Int32(dimension), signs.baseAddress! + signs.count - words)
                }
            }
            scales.append(scale)
            rowids.append(rowid)
            lengths.append(length)
        }
    }

    /// Writes `batch` as rows `first ..< first + batch.count`.
    func write(first: Int, batch: Batch) throws(IndexError) {
        precondition(first >= 0 && first + batch.count <= count, "a batch outside the file's rows")
        let words = RowFile.Layout.signWords(dimension)
        try put(batch.codes, section: .codes, at: first * dimension)
        try put(batch.scales, section: .scales, at: first * 4)
        try put(batch.signs, section: .signs, at: first * words * 8)
        try put(batch.rowids, section: .rowids, at: first * 8)
        try put(batch.lengths, section: .lengths, at: first * 4)
    }

    private func put<T>(_ values: [T], section: RowFile.Section, at offset: Int) throws(IndexError) {
        try write(values, at: offsets[section]! + offset)
    }

    /// Writes the bytes of `values` at `offset`.
    private func write<T>(_ values: [T], at offset: Int) throws(IndexError) {
        try values.withUnsafeBytes { bytes in Result { () throws(IndexError) in try write(bytes, at: offset) } }.get()
    }

    private func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(IndexError) {
        var done = 0
        while done < bytes.count {
            let written = pwrite(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done))
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { throw Self.failure("cannot write \(temporary)") }
            done += written
        }
    }

    /// The sections that are not written a batch at a time.
    struct Rest {
        var scenarios: [Int32] = []
        /// 32 bytes a row.
        var leaves: [UInt8] = []
        var idOrder: [UInt32] = []
        var tagOffsets: [UInt32] = [0]
        var tagCodes: [UInt32] = []
        var idOffsets: [UInt64] = [0]
        var idBytes: [UInt8] = []
        var dictionary = RowFile.Dictionary()
        var removed: [UInt32] = []
    }

    /// What the header says the rows are.
    struct Identity {
        var kind: RowFile.Kind
        var version: Int
        var stateRoot: ContentID
        var baseCount = 0
        var baseStateRoot: ContentID?
    }

    /// Writes the other sections and the header, fsyncs the file when `durable`, and renames it
    /// to `path`.
    func finish(_ rest: Rest, identity: Identity, durable: Bool) throws(IndexError) {
        let layout = RowFile.Layout(count: count, dimension: dimension)
        var table: [RowFile.Section: Range<Int>] = [:]
        for section in RowFile.Section.allCases {
            if let size = layout.fixedSize(section) { table[section] = offsets[section]!..<offsets[section]! + size }
        }
        guard rest.scenarios.count == count, rest.leaves.count == count * 32, rest.idOrder.count == count,
              rest.tagOffsets.count == count + 1, rest.idOffsets.count == count + 1 else {
            throw IndexError(.snapshotMalformed, "the rows to write do not fill the rows file's sections")
        }
        func fixed<T>(_ values: [T], _ section: RowFile.Section) throws(IndexError) {
            try write(values, at: offsets[section]!)
        }
        try fixed(rest.scenarios, .scenarios)
        try fixed(rest.leaves, .leaves)
        try fixed(rest.idOrder, .idOrder)
        try fixed(rest.tagOffsets, .tagOffsets)
        try fixed(rest.idOffsets, .idOffsets)
        var next = variableStart
        func variable<T>(_ values: [T], _ section: RowFile.Section) throws(IndexError) {
            let size = values.count * MemoryLayout<T>.stride
            try write(values, at: next)
            table[section] = next..<next + size
            next = RowFile.Layout.aligned(next + size)
        }
        try variable(rest.tagCodes, .tagCodes)
        try variable(rest.idBytes, .idBytes)
        try variable(Array((try? JSONEncoder().encode(rest.dictionary)) ?? Data("{}".utf8)), .dictionary)
        try variable(rest.removed, .removed)

        var header = [UInt8](repeating: 0, count: RowFile.headerSize)
        func put<T: FixedWidthInteger>(_ value: T, at offset: Int) {
            withUnsafeBytes(of: value.littleEndian) { header.replaceSubrange(offset..<offset + $0.count, with: $0) }
        }
        header.replaceSubrange(0..<8, with: RowFile.magic)
        put(RowFile.formatVersion, at: 8)
        put(identity.kind.rawValue, at: 12)
        put(UInt32(dimension), at: 16)
        put(UInt32(RowFile.Layout.signWords(dimension)), at: 20)
        put(UInt64(count), at: 24)
        put(UInt64(identity.version), at: 32)
        header.replaceSubrange(40..<72, with: identity.stateRoot.bytes)
        put(UInt64(identity.baseCount), at: 72)
        if let root = identity.baseStateRoot { header.replaceSubrange(80..<112, with: root.bytes) }
        for section in RowFile.Section.allCases {
            let range = table[section]!
            put(UInt64(range.lowerBound), at: RowFile.sectionTable + section.rawValue * 16)
            put(UInt64(range.count), at: RowFile.sectionTable + section.rawValue * 16 + 8)
        }
        let sum = header.withUnsafeBytes { ContentID(hashing: UnsafeRawBufferPointer(rebasing: $0[0..<RowFile.checksumOffset])) }
        header.replaceSubrange(RowFile.checksumOffset..<RowFile.headerSize, with: sum.bytes)
        try write(header, at: 0)
        guard ftruncate(descriptor, off_t(next)) == 0 else { throw Self.failure("cannot size \(temporary)") }
        if durable { guard fsync(descriptor) == 0 else { throw Self.failure("cannot fsync \(temporary)") } }
        guard rename(temporary, path) == 0 else { throw Self.failure("cannot rename \(temporary) to \(path)") }
        finished = true
    }
}
