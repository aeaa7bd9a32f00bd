import CSQLite
import CSQLiteStream
import Glibc
import Synchronization

/// One SQLite connection.
///
/// Connections are opened in serialized threading mode (`SQLITE_OPEN_FULLMUTEX`), so SQLite
/// itself serialises every call made on one connection; `Statement`s are not `Sendable` and
/// stay with the code that prepared them.
public final class Database: @unchecked Sendable {
    // @unchecked: the only stored state is the immutable handle, and SQLite's serialized mode
    // (FULLMUTEX, requested on every open) makes concurrent calls on it safe.

    public enum OpenMode: Sendable {
        /// Read only. `immutable` promises SQLite that nobody changes the file while it is open
        /// (true of an installed snapshot, which is replaced by rename, never written): no locks.
        case readOnly(immutable: Bool)
        /// Read only and immutable (no one writes the file while it is open), for one pass over
        /// a file that need not stay in the page cache: its pages read in sequence are read
        /// direct, in runs of megabytes (the `cairn-stream` VFS, Sources/CSQLiteStream), the rest
        /// as usual.
        case streaming
        /// Read and write an existing file.
        case readWrite
        /// Read and write, creating the file if it does not exist.
        case readWriteCreate
        /// Read only and immutable, through a descriptor: `path` is `/proc/self/fd/N`, and the
        /// connection reads the file N holds, whatever its original path names now (the
        /// `cairn-pinned` VFS, Sources/CSQLiteStream).
        case pinned
    }

    let handle: OpaquePointer
    /// The file (device, inode) when opened immutable: counted in `immutableOpens` while open.
    let immutableFile: FileKey?

    /// Milliseconds a statement waits for another connection's lock before failing.
    public static let defaultBusyTimeout: Int32 = 5_000

    public init(path: String, mode: OpenMode, busyTimeout: Int32 = Database.defaultBusyTimeout) throws(IndexError) {
        var flags = SQLITE_OPEN_FULLMUTEX | SQLITE_OPEN_EXRESCODE
        var name = path
        var vfs: UnsafePointer<CChar>?
        switch mode {
        case .readOnly:
            flags |= SQLITE_OPEN_READONLY
        case .streaming:
            // Immutable (below): the VFS's buffers are never checked against changes, and it
            // closes a descriptor of its own on the file, which would drop any POSIX lock of this
            // process's on it. Where the VFS cannot be registered, the default one reads the file.
            flags |= SQLITE_OPEN_READONLY
            if cairn_stream_vfs_register() == SQLITE_OK { vfs = cairn_stream_vfs_name }
        case .pinned:
            // The default VFS would resolve the descriptor's link to its path: another file.
            flags |= SQLITE_OPEN_READONLY
            guard cairn_pinned_vfs_register() == SQLITE_OK else {
                throw IndexError(.sqlite, "cannot open \(path): the cairn-pinned VFS is not registered")
            }
            vfs = cairn_pinned_vfs_name
        case .readWrite:
            flags |= SQLITE_OPEN_READWRITE
        case .readWriteCreate:
            flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        }
        if Self.immutableFlag(mode) {
            flags |= SQLITE_OPEN_URI
            name = "file:" + Database.uriEscaped(path) + "?immutable=1"
        }
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(name, &db, flags, vfs)
        guard rc == SQLITE_OK, let db else {
            let code = db.map { sqlite3_extended_errcode($0) } ?? rc
            sqlite3_close_v2(db)
            throw IndexError(.sqlite, "cannot open the database: \(Database.describe(code))", sqliteCode: code)
        }
        handle = db
        immutableFile = Self.immutableFlag(mode) ? FileKey(path: path) : nil
        if let immutableFile { Self.immutableOpens.withLock { $0[immutableFile, default: 0] += 1 } }
        sqlite3_busy_timeout(db, busyTimeout)
        _ = cairn_sqlite3_db_config_defensive(db, 1)
    }

    deinit {
        sqlite3_close_v2(handle)
        if let immutableFile {
            Self.immutableOpens.withLock {
                $0[immutableFile, default: 1] -= 1
                if $0[immutableFile] == 0 { $0[immutableFile] = nil }
            }
        }
    }

    /// Whether a connection of this process has the file at `path` open as immutable (a served
    /// snapshot: SQLite reads it without locks, so it must not change while such a connection
    /// lives). A connection's statements keep it alive.
    public static func isOpenImmutable(_ path: String) -> Bool {
        guard let key = FileKey(path: path) else { return false }
        return immutableOpens.withLock { $0[key] != nil }
    }

    private static let immutableOpens = Mutex<[FileKey: Int]>([:])

    struct FileKey: Hashable {
        let device: UInt64
        let inode: UInt64

        init(device: UInt64, inode: UInt64) {
            (self.device, self.inode) = (device, inode)
        }

        init?(path: String) {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            self.init(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        }
    }

    private static func immutableFlag(_ mode: OpenMode) -> Bool {
        switch mode {
        case .readOnly(immutable: true), .streaming, .pinned: true
        default: false
        }
    }

    /// Compiles one SQL statement (Cairn's own SQL: values are always bound, never spliced).
    public func prepare(_ sql: String, persistent: Bool = false) throws(IndexError) -> Statement {
        var statement: OpaquePointer?
        let flags = persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0
        let rc = sqlite3_prepare_v3(handle, sql, -1, flags, &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            // The message is about Cairn's SQL text (a missing table, a syntax error), no data.
            throw IndexError(.sqlite, "cannot prepare a statement: \(String(cString: sqlite3_errmsg(handle)))",
                             sqliteCode: sqlite3_extended_errcode(handle))
        }
        return Statement(handle: statement, database: self)
    }

    /// Runs one or more SQL statements that take no parameters and return no rows.
    public func exec(_ sql: String) throws(IndexError) {
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error("cannot execute a statement", rc) }
    }

    /// Turns off the rollback journal of database `schema` (`PRAGMA journal_mode = OFF`) and
    /// checks that SQLite did: a defensive connection (every one of Cairn's) silently keeps its
    /// journal instead, so defensive mode is lifted for this pragma alone. For scratch files only:
    /// without a journal a transaction that fails leaves the file half changed.
    public func turnOffJournal(schema: String = "main") throws(IndexError) {
        _ = cairn_sqlite3_db_config_defensive(handle, 0)
        defer { _ = cairn_sqlite3_db_config_defensive(handle, 1) }
        let pragma = try prepare("PRAGMA \(schema).journal_mode = OFF")
        guard try pragma.step(), let mode = pragma.string(at: 0), mode.lowercased() == "off" else {
            throw IndexError(.sqlite, "SQLite kept the rollback journal of \(schema) on")
        }
    }

    /// Runs `body` inside `BEGIN IMMEDIATE … COMMIT`, rolling back if it throws.
    public func transaction<T>(_ body: () throws(IndexError) -> T) throws(IndexError) -> T {
        try exec("BEGIN IMMEDIATE")
        do {
            let value = try body()
            try exec("COMMIT")
            return value
        } catch {
            try? exec("ROLLBACK")
            throw error
        }
    }

    /// Rows changed by the most recent INSERT, UPDATE or DELETE.
    public var changes: Int { Int(sqlite3_changes64(handle)) }

    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// An error for result code `rc` whose message holds SQLite's generic text for the code and
    /// never `sqlite3_errmsg`, which can quote bound values (an FTS5 syntax error quotes the query).
    func error(_ what: String, _ rc: Int32) -> IndexError {
        let code = sqlite3_extended_errcode(handle)
        let effective = (code & 0xFF) == (rc & 0xFF) ? code : rc
        return IndexError((effective & 0xFF) == SQLITE_FULL ? .diskFull : .sqlite, "\(what): \(Database.describe(effective))",
                          sqliteCode: effective)
    }

    static func describe(_ code: Int32) -> String {
        "\(String(cString: sqlite3_errstr(code))) (SQLite code \(code))"
    }

    /// Escapes the characters that are special in a SQLite URI filename.
    static func uriEscaped(_ path: String) -> String {
        var out = ""
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "%"), UInt8(ascii: "?"), UInt8(ascii: "#"), 0..<0x20, 0x7F...:
                let hex = Array("0123456789ABCDEF")
                out += "%" + String(hex[Int(byte >> 4)]) + String(hex[Int(byte & 0xF)])
            default:
                out.unicodeScalars.append(Unicode.Scalar(byte))
            }
        }
        return out
    }
}
