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
    /// The file the pool reads (device, inode).
    private let file: Database.FileKey
    /// A descriptor of that file, or -1: fresh connections then open `path`.
    private let pinned: Int32
    /// Run on every connection the pool opens (e.g. to register functions); `first` has had it.
    private let prepare: @Sendable (Database) throws(IndexError) -> Void
    private let idle: Mutex<[Database]>

    /// The first connection of a pool on `path`, and what the pool needs to open more on the
    /// same file: a descriptor taken before the connection is opened through it, so that a file
    /// renamed over the path meanwhile is not the one pinned. Without /proc (or with
    /// `pinning: false`, for tests), the path is opened, and only if it named the same file
    /// just before and just after.
    struct Opened {
        let first: Database
        let pinned: Int32
        let file: Database.FileKey

        /// Closes the descriptor of an `Opened` no pool took (its owner failed before).
        func close() {
            if pinned >= 0 { Glibc.close(pinned) }
        }
    }

    static func open(_ path: String, pinning: Bool = true) throws(IndexError) -> Opened {
        if pinning {
            let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC)
            if descriptor >= 0 {
                // A pinned open that fails (the VFS not registered, say) falls back to the path,
                // which says what is wrong with the file if anything is.
                if access("/proc/self/fd/\(descriptor)", F_OK) == 0,
                   let first = try? Database(path: "/proc/self/fd/\(descriptor)", mode: .pinned), let file = first.immutableFile {
                    return Opened(first: first, pinned: descriptor, file: file)
                }
                close(descriptor)
            }
        }
        guard let before = Database.FileKey(path: path) else {
            throw IndexError(.sqlite, "cannot open the database: \(path) is missing")
        }
        let first = try Database(path: path, mode: .readOnly(immutable: true))
        guard first.immutableFile == before else { throw replaced(path) }
        return Opened(first: first, pinned: -1, file: before)
    }

    init(path: String, capacity: Int, opened: Opened,
         prepare: @escaping @Sendable (Database) throws(IndexError) -> Void = { _ in }) {
        self.path = path
        self.capacity = max(1, capacity)
        self.prepare = prepare
        file = opened.file
        pinned = opened.pinned
        idle = Mutex([opened.first])
    }

    // Closing a descriptor drops this process's POSIX locks on the file (as the stream VFS's
    // does, Database.OpenMode.streaming): harmless here, since a served snapshot is never
    // written and its readers take no locks (immutable).
    deinit {
        if pinned >= 0 { close(pinned) }
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

    /// The path named another file than the one being read: not damage (an install renamed a
    /// new file over it), so `.io`, which callers take for a cause outside the file.
    static func replaced(_ path: String) -> IndexError {
        IndexError(.io, "the index file \(path) was replaced while it was being read; read it again")
    }

    private func openFresh() throws(IndexError) -> Database {
        let database: Database
        if pinned >= 0 {
            database = try Database(path: "/proc/self/fd/\(pinned)", mode: .pinned)
        } else {
            guard Database.FileKey(path: path) == file else { throw Self.replaced(path) }
            database = try Database(path: path, mode: .readOnly(immutable: true))
            guard database.immutableFile == file else { throw Self.replaced(path) }
        }
        try prepare(database)
        return database
    }
}
