import Foundation

/// Heavy, blocking install work (hashing, inflating, applying, verifying, canaries) runs on a
/// thread of its own at a lower CPU priority, never on the few cooperative threads that the
/// socket's queries run on: an install then slows queries only as much as sharing the cores
/// does, and the scheduler prefers the queries.
public enum BackgroundWork {
    /// How much nicer install threads are than the thread that starts them (on Linux the nice
    /// value is per thread: `setpriority(PRIO_PROCESS, 0, n)` sets the calling thread's). Relative,
    /// so that a cairnd started with a nice value (systemd `Nice=`, `nice -n`) still runs its
    /// installs below its queries; 19 at most.
    static let niceness: Int32 = 10

    /// The nice value of install threads started from a thread whose nice value is `current`.
    static func niceness(below current: Int32) -> Int32 { min(19, max(current, -20) + niceness) }

    /// Starts `body` on an install thread of its own and returns at once; the caller waits for
    /// it by its own means (`SnapshotStream` joins its inflating thread).
    static func start(_ body: @escaping @Sendable () -> Void) {
        let target = niceness(below: getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0))
        Thread {
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, target)
            body()
        }.start()
    }

    public static func run<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let target = niceness(below: getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0))
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            let thread = Thread {
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, target)
                continuation.resume(returning: Result { () throws(E) -> T in try body() })
            }
            thread.start()
        }
        return try result.get()
    }
}

extension Duration {
    /// Whole milliseconds, for log metadata.
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
