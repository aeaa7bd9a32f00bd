import Dispatch
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
    public static let niceness: Int32 = 10

    /// The nice value of install threads started from a thread whose nice value is `current`.
    public static func niceness(below current: Int32) -> Int32 { min(19, max(current, -20) + niceness) }

    /// Starts `body` on an install thread of its own and returns at once; the caller waits for
    /// it by its own means (`SnapshotStream` joins its inflating thread).
    public static func start(_ body: @escaping @Sendable () -> Void) {
        let target = niceness(below: getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0))
        Thread {
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, target)
            body()
        }.start()
    }

    /// Work started on an install thread of its own, whose result a blocking caller (itself an
    /// install thread) takes when it needs it: two parts of one install at once.
    public final class Pending<T: Sendable>: @unchecked Sendable {
        // Left by the worker once `result` is written; any number of threads may wait for it.
        private let done = DispatchGroup()
        // Written once by the worker before `done` is left; read after waiting for it.
        private var result: T?

        public init(_ body: @escaping @Sendable () -> T) {
            done.enter()
            BackgroundWork.start { [self] in
                result = body()
                done.leave()
            }
        }

        /// Whether the work is done (its result ready), without waiting.
        public var isDone: Bool { done.wait(timeout: .now()) == .success }

        /// Blocks until the work is done and returns its result; later calls, from any thread,
        /// return it at once.
        @discardableResult
        public func wait() -> T {
            done.wait()
            return result!
        }
    }

    /// Runs `body` on an install thread of its own and returns its result. `body`, and what it
    /// captures, is released before the caller resumes: a thread keeps its closure until it
    /// exits, so a caller that then drops its last reference to something the work used (a
    /// data directory and its lock) would otherwise race the thread's exit.
    public static func run<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let target = niceness(below: getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0))
        let work = Work(body)
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            let thread = Thread {
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, target)
                continuation.resume(returning: work.runOnce())
            }
            thread.start()
        }
        return try result.get()
    }

    /// Work that runs once and lets go of its closure as it returns.
    private final class Work<T: Sendable, E: Error>: @unchecked Sendable {
        // Touched only by the one thread that runs it.
        private var body: (@Sendable () throws(E) -> T)?

        init(_ body: @escaping @Sendable () throws(E) -> T) { self.body = body }

        func runOnce() -> Result<T, E> {
            guard let body else { preconditionFailure("background work runs once") }
            self.body = nil
            return Result { () throws(E) -> T in try body() }
        }
    }
}
