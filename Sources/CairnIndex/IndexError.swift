/// The one error type of CairnIndex: an opaque code, a one-line message that says what happened
/// and what to do, and an optional cause. Messages never contain document text, chunk text or
/// query text: SQLite's own messages are used only where the SQL is Cairn's (preparing
/// statements); errors while stepping report SQLite's generic text for the result code.
public struct IndexError: Error, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        public var description: String { name }

        /// SQLite reported an error; `sqliteCode` holds its extended result code.
        public static let sqlite = Code(name: "sqlite")
        /// The file to create already exists (snapshots are written once).
        public static let fileExists = Code(name: "file_exists")
        /// The file is not a Cairn snapshot, or its meta table is missing or malformed.
        public static let snapshotMalformed = Code(name: "snapshot_malformed")
        /// A stored hash disagrees with the hash recomputed from the stored data.
        public static let hashMismatch = Code(name: "hash_mismatch")
        /// The recomputed state root (or chunk count) differs from the expected one.
        public static let stateRootMismatch = Code(name: "state_root_mismatch")
        /// A vector has the wrong number of values for the snapshot's dimension.
        public static let dimensionMismatch = Code(name: "dimension_mismatch")
        /// Upserts and deletes that cannot apply to this snapshot (unknown id, duplicate id).
        public static let deltaMismatch = Code(name: "delta_mismatch")
        /// A search request outside its documented bounds (e.g. k not in 1...100).
        public static let invalidRequest = Code(name: "invalid_request")
        /// Two rows of a snapshot being written share one id.
        public static let duplicateID = Code(name: "duplicate_id")
        /// A file beside the snapshot (a rows file) cannot be written or read.
        public static let io = Code(name: "io")
        /// The disk (or the file-size limit) is full.
        public static let diskFull = Code(name: "disk_full")
    }

    public let code: Code
    public let message: String
    /// SQLite's extended result code when `code == .sqlite`.
    public let sqliteCode: Int32?
    public let cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, sqliteCode: Int32? = nil, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = IndexError.oneLine(message)
        self.sqliteCode = sqliteCode
        self.cause = cause
    }

    /// Whether another connection holds a lock this one needs (SQLITE_BUSY or SQLITE_LOCKED).
    public var isBusy: Bool {
        guard let sqliteCode else { return false }
        return sqliteCode & 0xFF == 5 || sqliteCode & 0xFF == 6
    }

    /// Whether trying again later can succeed (a busy or locked database, a full disk).
    public var isRetryable: Bool {
        guard let sqliteCode else { return false }
        return isBusy || sqliteCode & 0xFF == 13 /* SQLITE_FULL */
    }

    /// Whether the failure lies outside the file's bytes: a full disk, a rows file that cannot be
    /// written, or SQLite busy, out of memory, read-only, full or unable to open a file that is
    /// there. Such a version is not bad, and must not be discarded: opening it can succeed
    /// later. A read error (SQLITE_IOERR, a bad sector) is the file's own: installed again, it
    /// lands on other blocks.
    public var isEnvironmental: Bool {
        if code == .diskFull || code == .io { return true }
        guard code == .sqlite, let sqliteCode else { return false }
        // SQLITE_BUSY, LOCKED, NOMEM, READONLY, FULL, CANTOPEN.
        return [5, 6, 7, 8, 13, 14].contains(sqliteCode & 0xFF)
    }

    /// A rows file that cannot be opened or mapped now (too many open files, no memory or
    /// address space: `RowFile`): the device's limits, not the version's bytes.
    public var cannotOpenNow: Bool { cause is RowFile.CannotOpenNow }

    public var description: String { "\(code): \(message)" }

    static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 })
    }
}
