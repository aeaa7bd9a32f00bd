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
    private let logger: Logger

    public init(_ initial: ServingVersion? = nil, logger: Logger = Logger(label: "cairn.search.index")) {
        state = Mutex(initial)
        self.logger = logger
    }

    /// The version serving now, or nil before the first install.
    public var current: ServingVersion? { state.withLock { $0 } }

    /// Serves `version` from now on; returns the one it replaced. Queries already running
    /// finish on the version they started with.
    @discardableResult
    public func install(_ version: ServingVersion) -> ServingVersion? {
        let previous = state.withLock { current in
            defer { current = version }
            return current
        }
        logger.info("serving a new version", metadata: [
            "cairn.snapshot.version": "\(version.version)", "cairn.snapshot.state_root": "\(version.stateRoot)",
            "cairn.snapshot.previous_version": "\(previous.map { String($0.version) } ?? "none")",
            "cairn.snapshot.dense_available": "\(version.denseAvailable)",
        ])
        return previous
    }
}
