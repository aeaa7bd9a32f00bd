import CSQLite

/// A prepared statement, finalized when released. Parameter and column indexes follow SQLite:
/// parameters count from 1, columns from 0.
public final class Statement {
    let handle: OpaquePointer
    /// Keeps the connection open while the statement lives.
    let database: Database

    init(handle: OpaquePointer, database: Database) {
        self.handle = handle
        self.database = database
    }

    deinit {
        sqlite3_finalize(handle)
    }

    // MARK: Binding

    public func bind(_ value: Int, at index: Int32) throws(IndexError) {
        try check(sqlite3_bind_int64(handle, index, Int64(value)), "bind")
    }

    public func bind(_ value: Int64, at index: Int32) throws(IndexError) {
        try check(sqlite3_bind_int64(handle, index, value), "bind")
    }

    public func bind(_ value: Double, at index: Int32) throws(IndexError) {
        try check(sqlite3_bind_double(handle, index, value), "bind")
    }

    public func bind(_ value: String, at index: Int32) throws(IndexError) {
        // withCString gives a non-nil pointer even for "", so the value is empty text, not NULL;
        // the explicit length keeps embedded NUL characters.
        let count = Int32(value.utf8.count)
        let rc = value.withCString { cairn_sqlite3_bind_text_transient(handle, index, $0, count) }
        try check(rc, "bind")
    }

    public func bind(_ value: [UInt8], at index: Int32) throws(IndexError) {
        let rc = value.withUnsafeBytes { bytes in
            // SQLite stores a NULL pointer as SQL NULL; bind a zero-length blob explicitly.
            bytes.baseAddress.map { cairn_sqlite3_bind_blob_transient(handle, index, $0, Int32(bytes.count)) }
                ?? sqlite3_bind_zeroblob(handle, index, 0)
        }
        try check(rc, "bind")
    }

    public func bindNull(at index: Int32) throws(IndexError) {
        try check(sqlite3_bind_null(handle, index), "bind")
    }

    /// Binds `value`, or NULL when it is nil.
    public func bind(_ value: String?, at index: Int32) throws(IndexError) {
        if let value { try bind(value, at: index) } else { try bindNull(at: index) }
    }

    // MARK: Stepping

    /// Advances to the next row: true when a row is available, false when the statement is done.
    @discardableResult
    public func step() throws(IndexError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw database.error("cannot step a statement", rc)
        }
    }

    /// Steps until done (for statements that return no rows).
    public func run() throws(IndexError) {
        while try step() {}
    }

    /// Resets the statement to run again and clears its bindings.
    public func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    // MARK: Columns

    public func isNull(at column: Int32) -> Bool {
        sqlite3_column_type(handle, column) == SQLITE_NULL
    }

    public func int64(at column: Int32) -> Int64 {
        sqlite3_column_int64(handle, column)
    }

    public func int(at column: Int32) -> Int {
        Int(sqlite3_column_int64(handle, column))
    }

    public func double(at column: Int32) -> Double {
        sqlite3_column_double(handle, column)
    }

    /// The column as text, or nil when it is NULL.
    public func string(at column: Int32) -> String? {
        guard let text = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    /// The column's text as UTF-8 bytes without copying them, or nil when it is NULL. The
    /// bytes are SQLite's: valid only until the statement steps, resets or reads this column
    /// as another type.
    public func unsafeUTF8(at column: Int32) -> UnsafeBufferPointer<UInt8>? {
        guard let text = sqlite3_column_text(handle, column) else { return nil }
        return UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(handle, column)))
    }

    /// The column as bytes, or nil when it is NULL.
    public func blob(at column: Int32) -> [UInt8]? {
        if isNull(at: column) { return nil }
        let pointer = sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        guard let pointer, count > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Calls `body` with the column's bytes without copying them (valid only inside `body`).
    public func withBlob<T>(at column: Int32, _ body: (UnsafeRawBufferPointer) throws(IndexError) -> T) throws(IndexError) -> T {
        let pointer = sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        return try body(UnsafeRawBufferPointer(start: count > 0 ? pointer : nil, count: count))
    }

    private func check(_ rc: Int32, _ what: String) throws(IndexError) {
        guard rc == SQLITE_OK else { throw database.error("cannot \(what) a statement parameter", rc) }
    }
}
