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
    let path: String
    let capacity: Int
    /// The file the pool reads (device, inode), when known.
    private let file: Database.FileKey?
    /// A descriptor of that file, or -1: fresh connections then open `path`.
    private let pinned: Int32
    /// Run on every connection the pool opens (e.g. to register functions); `first` has had it.
    private let prepare: @Sendable (Database) throws(IndexError) -> Void
    private let idle: Mutex<[Database]>

    /// `pinning: false` opens fresh connections by the path, as where /proc is not mounted.
    init(path: String, capacity: Int, first: Database, pinning: Bool = true,
         prepare: @escaping @Sendable (Database) throws(IndexError) -> Void = { _ in }) {
        self.path = path
        self.capacity = max(1, capacity)
        self.prepare = prepare
        file = first.immutableFile
        pinned = pinning ? Self.pin(path, file: first.immutableFile) : -1
        idle = Mutex([first])
    }

    deinit {
        if pinned >= 0 { close(pinned) }
    }

    /// A descriptor of the file at `path` when it is `file` (the one `first` opened), else -1.
    private static func pin(_ path: String, file: Database.FileKey?) -> Int32 {
        guard let file else { return -1 }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return -1 }
        var info = stat()
        guard fstat(descriptor, &info) == 0, UInt64(info.st_dev) == file.device, UInt64(info.st_ino) == file.inode,
              access("/proc/self/fd/\(descriptor)", F_OK) == 0 else {
            close(descriptor)
            return -1
        }
        return descriptor
    }

    func withConnection<T>(_ body: (Database) throws(IndexError) -> T) throws(IndexError) -> T {
        let database: Database
        if let reused = idle.withLock({ $0.popLast() }) { database = reused } else { database = try openFresh() }
        defer {
            idle.withLock { connections in
                if connections.count < capacity { connections.append(database) }
            }
        }
        return try body(database)
    }

    private func openFresh() throws(IndexError) -> Database {
        let database: Database
        if pinned >= 0 {
            database = try Database(path: "/proc/self/fd/\(pinned)", mode: .pinned)
        } else {
            let replaced = IndexError(.sqlite, "the index file \(path) was replaced while its version served; ask again")
            guard Database.FileKey(path: path) == file else { throw replaced }
            database = try Database(path: path, mode: .readOnly(immutable: true))
            guard database.immutableFile == file else { throw replaced }
        }
        try prepare(database)
        return database
    }
}
