import Foundation
import Synchronization

/// Threads that stay awake between the matrix products of one query.
///
/// A short query's linear layers take ~100 µs each. Split over two cores with
/// `DispatchQueue.concurrentPerform`, the second half waited for a parked worker to wake (tens of
/// µs), and the caller often ran both halves itself before it did: two threads were no faster
/// than one. A team's helpers spin on an atomic counter for a while after each job, so the next
/// product of the same query starts on them at once, and park on a condition when the query is
/// over.
///
/// Work is split into chunks that the caller and the helpers claim from a shared counter, so a
/// helper that is not running (the machine busy with an install, say) costs the caller nothing:
/// the caller takes the chunks itself and waits only for a chunk a helper has already claimed.
/// One team serves the process; a call that finds it busy runs its chunks on its own thread.
public final class WorkerTeam: Sendable {
    /// Helpers for every core but the caller's.
    public static let shared = WorkerTeam(helpers: max(0, ProcessInfo.processInfo.activeProcessorCount - 1))

    private let helpers: [Helper]
    private let busy = Atomic<Bool>(false)

    /// Threads that can work on one call at once: the helpers and the caller.
    public var width: Int { helpers.count + 1 }

    public init(helpers count: Int) {
        helpers = (0..<count).map { _ in Helper() }
        for helper in helpers {
            let thread = Thread { helper.loop() }
            thread.name = "cairn-encoder-team"
            thread.start()
        }
    }

    /// Runs `work(0)`, …, `work(chunks − 1)`, each once, on the caller and whichever helpers are
    /// free, and returns when all have finished.
    public func run(chunks: Int, _ work: @escaping @Sendable (Int) -> Void) {
        guard chunks > 1, !helpers.isEmpty,
              busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else {
            for chunk in 0..<chunks { work(chunk) }
            return
        }
        let job = Job(chunks: chunks, work: work)
        for helper in helpers { helper.post(job) }
        job.work()
        job.waitUntilDone()
        busy.store(false, ordering: .releasing)
    }

    /// One call's chunks. A helper that wakes after the call has ended finds none left to claim,
    /// so it never touches the caller's buffers then.
    private final class Job: Sendable {
        private let chunks: Int
        private let body: @Sendable (Int) -> Void
        private let next = Atomic<Int>(0)
        private let done = Atomic<Int>(0)

        init(chunks: Int, work: @escaping @Sendable (Int) -> Void) {
            self.chunks = chunks
            body = work
        }

        /// Claims and runs chunks until none are left.
        func work() {
            while true {
                let chunk = next.add(1, ordering: .relaxed).oldValue
                guard chunk < chunks else { return }
                body(chunk)
                done.add(1, ordering: .releasing)
            }
        }

        /// Spins until every chunk has finished (only chunks a helper is running can be left);
        /// after a while it yields the core, in case that helper is waiting for one.
        func waitUntilDone() {
            var spins = 0
            while done.load(ordering: .acquiring) < chunks {
                spins += 1
                if spins > 10_000 { sched_yield() }
            }
        }
    }

    /// One helper thread and its mailbox.
    private final class Helper: @unchecked Sendable {
        // @unchecked: `sleeping` is only read and written with `condition` locked; everything
        // else is a Mutex or an Atomic.
        private let mailbox = Mutex<Job?>(nil)
        private let posted = Atomic<Int>(0)
        private let condition = NSCondition()
        private var sleeping = false

        /// Spins before parking: longer than the gaps between the products of one query
        /// (attention, LayerNorm), short enough not to hold a core long after it.
        private static let spinLimit = 100_000

        func post(_ job: Job) {
            mailbox.withLock { $0 = job }
            posted.add(1, ordering: .releasing)
            condition.lock()
            if sleeping { condition.signal() }
            condition.unlock()
        }

        func loop() {
            var seen = 0
            while true {
                var spins = 0
                while posted.load(ordering: .acquiring) == seen {
                    spins += 1
                    guard spins > Self.spinLimit else { continue }
                    condition.lock()
                    sleeping = true
                    while posted.load(ordering: .acquiring) == seen { condition.wait() }
                    sleeping = false
                    condition.unlock()
                }
                seen = posted.load(ordering: .acquiring)
                let job = mailbox.withLock { job in
                    defer { job = nil }
                    return job
                }
                job?.work()
            }
        }
    }
}
