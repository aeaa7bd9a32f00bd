public import Logging
import Synchronization

/// The version a process searches, swapped atomically.
///
/// A query calls `current` once at its start and uses that reference to the end, so it never
/// mixes two versions and never fails because of a swap; the old version is closed when the
/// last query holding it ends. In cairnd, CairnSync calls `install(_:)` after it has verified
/// and atomically activated a new version on disk; in cairn-server, the online search loader
/// after it has verified a channel's newest version.
public final class IndexHolder: Sendable {
    private let state: Mutex<ServingVersion?>
    /// Why nothing is served although a version is installed (it cannot be opened now), while so.
    private let unservable = Mutex<String?>(nil)
    /// What `noIndex` says while nothing was ever installed, when the default would mislead.
    private let nothingInstalled = Mutex<String?>(nil)
    private let logger: Logger

    public init(_ initial: ServingVersion? = nil, logger: Logger = Logger(label: "cairn.search.index")) {
        state = Mutex(initial)
        self.logger = logger
    }

    /// The version serving now, or nil before the first install.
    public var current: ServingVersion? { state.withLock { $0 } }

    /// Says why nothing is served while an installed version cannot be opened (a full disk):
    /// `noIndex` answers with it until a version is installed here.
    public func markUnservable(_ reason: String) { unservable.withLock { $0 = reason } }

    /// The reason `markUnservable` gave, while nothing is served.
    public var unservableReason: String? { current == nil ? unservable.withLock { $0 } : nil }

    /// Says `reason` instead of "wait for the first sync" while nothing is installed (a daemon
    /// with no source to sync from).
    public func explainNothingInstalled(_ reason: String) { nothingInstalled.withLock { $0 = reason } }

    /// The 503 `no_index` a request gets while nothing is served: "nothing installed yet" (or
    /// what `explainNothingInstalled` said), or the reason `markUnservable` gave.
    public var noIndex: APIError {
        (unservable.withLock { $0 } ?? nothingInstalled.withLock { $0 }).map { APIError(503, "no_index", $0) } ?? .noIndex
    }

    /// Serves `version` from now on; returns the one it replaced. Queries already running
    /// finish on the version they started with.
    @discardableResult
    public func install(_ version: ServingVersion) -> ServingVersion? {
        let previous = state.withLock { current in
            defer { current = version }
            return current
        }
        unservable.withLock { $0 = nil }
        logger.info("serving a new version", metadata: [
            "cairn.snapshot.version": "\(version.version)", "cairn.snapshot.state_root": "\(version.stateRoot)",
            "cairn.snapshot.previous_version": "\(previous.map { String($0.version) } ?? "none")",
            "cairn.snapshot.dense_available": "\(version.denseAvailable)",
        ])
        return previous
    }
}
