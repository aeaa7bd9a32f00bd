import Glibc
import Synchronization

/// A few read-only connections to one immutable snapshot, so concurrent queries do not queue
/// behind one connection. A query takes an idle connection (or opens a fresh one when all are
/// busy) and gives it back afterwards; at most `capacity` idle connections are kept.
///
/// A fresh connection reads the file the pool was opened on, not whatever its path names later:
/// an install of the same version number (a trust recovery putting the publisher's version N
/// over a thief's) renames a new file to that path while the query path still serves the old
/// one, and the clean-up may remove the old one before the query path lets go of it. The pool
/// holds a descriptor of its file and opens fresh connections through it
/// (`/proc/self/fd/N`, `Database.OpenMode.pinned`). Without /proc it opens the path, and only
/// while the path still names the pool's file (same device and inode before and after the
/// open); otherwise the query fails rather than read another version's file beside this one's
/// rows.
final class ConnectionPool: Sendable {
    let capacity: Int
    /// The file every connection reads.
    let file: PinnedFile
    /// Run on every connection the pool opens (e.g. to register functions); `first` has had it.
    private let prepare: @Sendable (Database) throws(IndexError) -> Void
    private let idle: Mutex<[Database]>

    /// The file at `path` and a first connection to it: through a descriptor taken before the
    /// connection opens (a file renamed over the path meanwhile is not the one pinned), else
    /// (no /proc, or `pinning: false` for tests) by the path.
    static func open(_ path: String, pinning: Bool = true) throws(IndexError) -> (file: PinnedFile, first: Database) {
        // A pinned open that fails (the VFS not registered, say) falls back to the path, which
        // says what is wrong with the file if anything is.
        if pinning, let pinned = PinnedFile(pinning: path), let first = try? pinned.connect() { return (pinned, first) }
        let file = try PinnedFile(byPath: path)
        return (file, try file.connect())
    }

    init(file: PinnedFile, first: Database, capacity: Int,
         prepare: @escaping @Sendable (Database) throws(IndexError) -> Void = { _ in }) {
        self.file = file
        self.capacity = max(1, capacity)
        self.prepare = prepare
        idle = Mutex([first])
    }

    func withConnection<T>(_ body: (Database) throws(IndexError) -> T) throws(IndexError) -> T {
        let database: Database
        if let reused = idle.withLock({ $0.popLast() }) {
            database = reused
        } else {
            database = try file.connect()
            try prepare(database)
        }
        defer {
            idle.withLock { connections in
                if connections.count < capacity { connections.append(database) }
            }
        }
        return try body(database)
    }
}

/// The file a pool reads, as it was when the pool opened it: connections open through a
/// descriptor of it (`/proc/self/fd/N`, `Database.OpenMode.pinned`), which it closes when the
/// last holder lets go; or, where that cannot serve (no /proc), by its path, and only while the
/// path still names it (same device and inode before and after the open).
final class PinnedFile: Sendable {
    let path: String
    /// The file's device and inode.
    let key: Database.FileKey
    /// The descriptor connections open through, or -1: by `path`.
    private let descriptor: Int32

    /// A descriptor of the file at `path`; nil when it cannot be opened.
    init?(pinning path: String) {
        let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        var info = stat()
        guard descriptor >= 0 else { return nil }
        guard fstat(descriptor, &info) == 0 else { close(descriptor); return nil }
        (self.path, self.descriptor) = (path, descriptor)
        key = Database.FileKey(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// The file at `path` as it is now, opened by its path each time.
    init(byPath path: String) throws(IndexError) {
        guard let key = Database.FileKey(path: path) else {
            throw IndexError(.sqlite, "cannot open the database: \(path) is missing")
        }
        (self.path, self.key, descriptor) = (path, key, -1)
    }

    // Closing a descriptor drops this process's POSIX locks on the file (as the stream VFS's
    // does, Database.OpenMode.streaming): harmless here, since a served snapshot is never
    // written and its readers take no locks (immutable).
    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// The path named another file than the one being read: not damage (an install renamed a
    /// new file over it), so `.io`, which callers take for a cause outside the file.
    static func replaced(_ path: String) -> IndexError {
        IndexError(.io, "the index file \(path) was replaced while it was being read; read it again")
    }

    /// A new read-only connection to the file. Through the descriptor, it must be seen as the
    /// file by its key (the immutable-open count, `Database.isOpenImmutable`, needs /proc).
    func connect() throws(IndexError) -> Database {
        if descriptor >= 0 {
            let database = try Database(path: "/proc/self/fd/\(descriptor)", mode: .pinned)
            guard database.immutableFile == key else { throw Self.replaced(path) }
            return database
        }
        guard Database.FileKey(path: path) == key else { throw Self.replaced(path) }
        let database = try Database(path: path, mode: .readOnly(immutable: true))
        guard database.immutableFile == key else { throw Self.replaced(path) }
        return database
    }
}
