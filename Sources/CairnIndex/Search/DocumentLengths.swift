/// Every row's length in tokens (all columns together), read once from FTS5's `%_docsize`
/// table when an index opens, for `cairn_bm25`. Immutable after init.
final class DocumentLengths: @unchecked Sendable {
    private let rowids: [Int64]
    private let tokens: [Int32]
    /// Whether rowids run first, first + 1, … without gaps (the usual case): then a lookup is an index.
    private let contiguous: Bool

    convenience init(db: Database) throws(IndexError) {
        let statement = try db.prepare("SELECT id, sz FROM chunks_fts_docsize ORDER BY id")
        var rowids: [Int64] = [], tokens: [Int32] = []
        while try statement.step() {
            rowids.append(statement.int64(at: 0))
            tokens.append(try statement.withBlob(at: 1, Self.total))
        }
        self.init(rowids: rowids, tokens: tokens)
    }

    /// Lengths given by row: `rowids` ascending, `tokens[i]` the length of `rowids[i]`.
    init(rowids: [Int64], tokens: [Int32]) {
        self.rowids = rowids
        self.tokens = tokens
        contiguous = rowids.last.map { $0 - rowids[0] == Int64(rowids.count - 1) } ?? true
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
            guard let (value, next) = varint(bytes, at: offset) else {
                throw IndexError(.snapshotMalformed, "a row of the full-text index has a malformed size record")
            }
            total += value
            offset = next
        }
        return Int32(clamping: total)
    }

    /// The length of `rowid`, or nil when the table has no size for it.
    func tokens(rowid: Int64) -> Int32? {
        guard let first = rowids.first else { return nil }
        if contiguous {
            let index = rowid - first
            return index >= 0 && index < Int64(tokens.count) ? tokens[Int(index)] : nil
        }
        var low = 0, high = rowids.count
        while low < high {
            let middle = (low + high) / 2
            if rowids[middle] < rowid { low = middle + 1 } else { high = middle }
        }
        return low < rowids.count && rowids[low] == rowid ? tokens[low] : nil
    }

    /// SQLite's variable-length integer (as FTS5 writes sizes): big-endian groups of 7 bits,
    /// the high bit set on every byte but the last, the ninth byte whole.
    static func varint(_ bytes: UnsafeRawBufferPointer, at start: Int) -> (Int64, Int)? {
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
