/// Every row's length in tokens (all columns together), for `cairn_bm25`: from the rows files
/// (`IndexContents`, which the scan that wrote them read from FTS5's `%_docsize` table).
final class DocumentLengths: Sendable {
    private let contents: IndexContents

    init(contents: IndexContents) {
        self.contents = contents
    }

    /// The length of one row of `db`, read from its size record (nil when it has none).
    static func read(rowid: Int64, from statement: Statement) throws(IndexError) -> Int32? {
        statement.reset()
        try statement.bind(rowid, at: 1)
        guard try statement.step() else { return nil }
        return try statement.withBlob(at: 0, total)
    }

    /// The statement `read(rowid:from:)` steps.
    static let rowSQL = "SELECT sz FROM chunks_fts_docsize WHERE id = ?1"

    /// A size record's total: the sum of its varints (one per column).
    static func total(_ bytes: UnsafeRawBufferPointer) throws(IndexError) -> Int32 {
        var total: Int64 = 0
        var offset = 0
        while offset < bytes.count {
            guard let (value, next) = varint(bytes, at: offset), value >= 0,
                  case let (sum, overflow) = total.addingReportingOverflow(value), !overflow else {
                throw IndexError(.snapshotMalformed, "a row of the full-text index has a malformed size record")
            }
            total = sum
            offset = next
        }
        return Int32(clamping: total)
    }

    /// The length of `rowid`, or nil when the row is not live or the table had no size for it.
    func tokens(rowid: Int64) -> Int32? {
        guard let row = contents.row(rowid: rowid) else { return nil }
        let length = contents.length(row)
        return length < 0 ? nil : length
    }

    /// A varint that is a size or an offset within one record: nil when it is negative or
    /// larger than any record (a damaged 9-byte varint), so that arithmetic on it cannot trap.
    static func size(_ bytes: UnsafeRawBufferPointer, at start: Int) -> (Int, Int)? {
        guard let (value, next) = varint(bytes, at: start), value >= 0, value <= Int64(Int32.max) else { return nil }
        return (Int(value), next)
    }

    /// SQLite's variable-length integer (as FTS5 writes sizes): big-endian groups of 7 bits,
    /// the high bit set on every byte but the last, the ninth byte whole.
    static func varint(_ bytes: UnsafeRawBufferPointer, at start: Int) -> (Int64, Int)? {
        // A negative start (a damaged size read as one) must not index before the buffer: its
        // subscript is not checked in an optimised build.
        guard start >= 0 else { return nil }
        var value: UInt64 = 0
        var offset = start
        for position in 0..<9 {
            guard offset < bytes.count else { return nil }
            let byte = bytes[offset]
            offset += 1
            if position == 8 { return (Int64(bitPattern: (value << 8) | UInt64(byte)), offset) }
            value = (value << 7) | UInt64(byte & 0x7F)
            if byte & 0x80 == 0 { return (Int64(bitPattern: value), offset) }
        }
        return nil
    }
}
