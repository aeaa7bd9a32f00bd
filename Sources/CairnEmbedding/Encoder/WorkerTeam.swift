import Foundation
import Synchronization

/// Threads that stay awake between the matrix products of one query.
///
/// A short query's linear layers take ~100 µs each. Split over two cores with
/// `DispatchQueue.concurrentPerform`, the second half waits for a parked worker to wake (tens of
/// µs), and the caller often runs both halves itself before it does: two threads were no faster
/// than one. A team's helpers spin on an atomic counter for a while after each job, so the next
/// product of the same query starts on them at once, and park on a condition when the query is
/// over. One team serves the process; a call that finds it busy runs its parts on its own thread.
final class WorkerTeam: Sendable {
    /// Helpers for every core but the caller's.
    static let shared = WorkerTeam(helpers: max(0, ProcessInfo.processInfo.activeProcessorCount - 1))

    private let helpers: [Helper]
    private let busy = Atomic<Bool>(false)

    /// The number of parts a call can run at once: the helpers and the caller.
    var width: Int { helpers.count + 1 }

    init(helpers count: Int) {
        helpers = (0..<count).map { _ in Helper() }
        for helper in helpers {
            let thread = Thread { helper.loop() }
            thread.name = "cairn-encoder-team"
            thread.start()
        }
    }

    /// Runs `work(0)`, …, `work(parts − 1)`: part 0 on the caller, the others on helpers (or all
    /// on the caller when the team is busy with another call or too small), and returns when all
    /// have finished.
    func run(parts: Int, _ work: @escaping @Sendable (Int) -> Void) {
        guard parts > 1, parts <= width,
              busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else {
            for part in 0..<parts { work(part) }
            return
        }
        let tickets = (1..<parts).map { part in helpers[part - 1].post(work, part: part) }
        work(0)
        for (helper, ticket) in zip(helpers, tickets) { helper.wait(for: ticket) }
        busy.store(false, ordering: .releasing)
    }

    /// One helper thread and its mailbox.
    private final class Helper: @unchecked Sendable {
        // @unchecked: `job` and `part` are written by the poster before it publishes a ticket with
        // a releasing store to `posted`, and read by the helper after an acquiring load that sees
        // that ticket; the poster writes them again only after `finished` says the job is done.
        private var job: (@Sendable (Int) -> Void)?
        private var part = 0
        private let posted = Atomic<Int>(0)
        private let finished = Atomic<Int>(0)
        private let condition = NSCondition()
        private var sleeping = false  // guarded by `condition`

        /// Spins before parking: about a millisecond, longer than the gaps within one query.
        private static let spinLimit = 200_000

        func post(_ work: @escaping @Sendable (Int) -> Void, part: Int) -> Int {
            job = work
            self.part = part
            let ticket = posted.add(1, ordering: .releasing).newValue
            condition.lock()
            if sleeping { condition.signal() }
            condition.unlock()
            return ticket
        }

        /// Spins until the helper has finished `ticket`; on a machine busy with other work the
        /// helper may not be running, so after a while the caller yields its core between checks.
        func wait(for ticket: Int) {
            var spins = 0
            while finished.load(ordering: .acquiring) != ticket {
                spins += 1
                if spins > Self.spinLimit / 10 { sched_yield() }
            }
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
                job?(part)
                finished.store(seen, ordering: .releasing)
            }
        }
    }
}
