import Synchronization

/// Whether the process is stopping (cairnd got SIGTERM or SIGINT): long maintenance work that
/// no task cancellation reaches (an export's copies and read-back, on a thread of its own) ends
/// at its next step instead of holding the graceful shutdown until the service manager kills it.
public enum Stopping {
    private static let requested = Atomic<Bool>(false)

    /// Says the process is stopping (once; never undone).
    public static func request() { requested.store(true, ordering: .releasing) }

    public static var isRequested: Bool { requested.load(ordering: .acquiring) }
}
