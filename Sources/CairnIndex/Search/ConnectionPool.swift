import Synchronization

/// A few read-only connections to one immutable snapshot, so concurrent queries do not queue
/// behind one connection. A query takes an idle connection (or opens a fresh one when all are
/// busy) and gives it back afterwards; at most `capacity` idle connections are kept.
final class ConnectionPool: Sendable {
    let path: String
    let capacity: Int
    /// Run on every connection the pool opens (e.g. to register functions); `first` has had it.
    private let prepare: @Sendable (Database) throws(IndexError) -> Void
    private let idle: Mutex<[Database]>

    init(path: String, capacity: Int, first: Database,
         prepare: @escaping @Sendable (Database) throws(IndexError) -> Void = { _ in }) {
        self.path = path
        self.capacity = max(1, capacity)
        self.prepare = prepare
        idle = Mutex([first])
    }

    func withConnection<T>(_ body: (Database) throws(IndexError) -> T) throws(IndexError) -> T {
        let database: Database
        if let reused = idle.withLock({ $0.popLast() }) {
            database = reused
        } else {
            database = try Database(path: path, mode: .readOnly(immutable: true))
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
