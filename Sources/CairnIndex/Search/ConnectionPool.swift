import Foundation
import Synchronization

/// A few read-only connections to one immutable snapshot, so concurrent queries do not queue
/// behind one connection. A query takes an idle connection (or opens a fresh one when all are
/// busy) and gives it back afterwards; at most `capacity` idle connections are kept.
///
/// A fresh connection opens the file by its path, which may since name another file: an install
/// of the same version number (a trust recovery replacing a thief's version N with the
/// publisher's) renames its folder over the served one before the query path lets go of it. A
/// fresh connection is therefore used only when its snapshot meta is the one the pool was opened
/// on (same version, same state root); otherwise, or when the file no longer opens, the query
/// waits for one of the pool's own connections instead of answering from another version.
final class ConnectionPool: Sendable {
    let path: String
    let capacity: Int
    /// The snapshot every connection must read.
    let meta: SnapshotMeta
    /// Run on every connection the pool opens (e.g. to register functions); `first` has had it.
    private let prepare: @Sendable (Database) throws(IndexError) -> Void
    private let state: Mutex<State>
    /// Signalled when a connection is given back while a query waits for one.
    private let returned = NSCondition()

    private struct State {
        var idle: [Database]
        /// Queries waiting for a connection because the path no longer names the file.
        var waiting = 0
    }

    init(path: String, capacity: Int, first: Database, meta: SnapshotMeta,
         prepare: @escaping @Sendable (Database) throws(IndexError) -> Void = { _ in }) {
        self.path = path
        self.capacity = max(1, capacity)
        self.meta = meta
        self.prepare = prepare
        state = Mutex(State(idle: [first]))
    }

    /// Queries waiting now for a connection of this file (for tests).
    var waiting: Int { state.withLock { $0.waiting } }

    func withConnection<T>(_ body: (Database) throws(IndexError) -> T) throws(IndexError) -> T {
        let database = try take()
        defer { giveBack(database) }
        return try body(database)
    }

    private func take() throws(IndexError) -> Database {
        if let reused = state.withLock({ $0.idle.popLast() }) { return reused }
        if let fresh = try openFresh() { return fresh }
        // The path names another file now: wait for one of this file's connections.
        returned.lock()
        defer { returned.unlock() }
        state.withLock { $0.waiting += 1 }
        defer { state.withLock { $0.waiting -= 1 } }
        while true {
            if let reused = state.withLock({ $0.idle.popLast() }) { return reused }
            returned.wait()
        }
    }

    /// A new connection to `path`, prepared; nil when the path no longer opens this pool's
    /// snapshot. Errors of `prepare` on the right file are thrown.
    private func openFresh() throws(IndexError) -> Database? {
        guard let database = try? Database(path: path, mode: .readOnly(immutable: true)),
              (try? Snapshot.meta(in: database)) == meta else { return nil }
        try prepare(database)
        return database
    }

    private func giveBack(_ database: Database) {
        // Under the condition's lock, so that a waiter between its look at `idle` and its
        // `wait` cannot miss the signal.
        returned.lock()
        let kept = state.withLock { state -> Bool in
            // Kept past `capacity` while queries wait: they cannot open their own.
            guard state.idle.count < capacity || state.waiting > 0 else { return false }
            state.idle.append(database)
            return true
        }
        if kept { returned.signal() }
        returned.unlock()
    }
}
