import Foundation
import Synchronization

/// Runs searches on a few threads of its own, never on Swift's cooperative pool.
///
/// Embedding a query and scanning the index is CPU-bound work of milliseconds; run inline in an
/// async handler it would hold one of the few cooperative threads (one per core) that also
/// drive the HTTP event loops, so a burst of searches could stall every other request. Here an
/// async caller suspends on a continuation while one of `threads` workers runs the job.
///
/// Bounded: at most `threads` jobs run, at most `queueLimit` wait
/// (first come, first served); beyond that `run` throws `APIError.busy` at once, so a flood of
/// requests gets quick 503s instead of unbounded memory and latency. A waiting job is not
/// cancellable: it runs when a worker is free (searches are short).
public final class SearchPool: Sendable {
    private let queue: JobQueue
    public let threads: Int

    public init(threads: Int, queueLimit: Int) {
        self.threads = max(1, threads)
        queue = JobQueue(capacity: self.threads + max(0, queueLimit))
        for _ in 0..<self.threads {
            let worker = Thread { [queue] in queue.work() }
            worker.stackSize = 8 << 20
            worker.start()
        }
    }

    deinit { queue.stop(workers: threads) }

    /// Runs `job` on a worker and returns its result; throws `APIError.busy` when the queue is
    /// full, or what `job` throws.
    public func run<T: Sendable>(_ job: @escaping @Sendable () throws(APIError) -> T) async throws(APIError) -> T {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, APIError>, Never>) in
            let accepted = queue.push {
                let result = Result { () throws(APIError) -> T in try job() }
                // Handed back only after the worker's slot is free again (see JobQueue.work), so
                // a caller that searches again as soon as it has its answer is not refused as busy.
                return { continuation.resume(returning: result) }
            }
            if !accepted { continuation.resume(returning: .failure(.busy)) }
        }
        return try result.get()
    }
}

/// The jobs waiting or running, shared by the pool's workers. The pool stops the workers when
/// it is released (each exits after the job it runs).
private final class JobQueue: Sendable {
    private struct State {
        /// A job runs, then returns how to deliver its result.
        var jobs: [@Sendable () -> @Sendable () -> Void] = []
        var head = 0  // index of the first job not yet taken
        /// Jobs accepted and not yet finished (waiting or running).
        var admitted = 0
        var stopping = false
    }

    private let state = Mutex(State())
    /// Counts jobs to take (and, at the end, one wake-up per worker to stop it).
    private let ready = DispatchSemaphore(value: 0)
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// Queues `job`; false (not queued) when `capacity` jobs are already waiting or running.
    func push(_ job: @escaping @Sendable () -> @Sendable () -> Void) -> Bool {
        let accepted = state.withLock { state in
            guard state.admitted < capacity, !state.stopping else { return false }
            state.admitted += 1
            state.jobs.append(job)
            return true
        }
        if accepted { ready.signal() }
        return accepted
    }

    /// A worker's loop: take the oldest job, run it, free its slot, deliver its result, repeat
    /// until stopped.
    func work() {
        while true {
            ready.wait()
            let job: (@Sendable () -> @Sendable () -> Void)? = state.withLock { state in
                guard state.head < state.jobs.count else { return nil }
                let job = state.jobs[state.head]
                state.head += 1
                if state.head >= 64, state.head * 2 >= state.jobs.count {
                    state.jobs.removeFirst(state.head)
                    state.head = 0
                }
                return job
            }
            guard let job else { return }  // a stop signal
            let deliver = job()
            state.withLock { $0.admitted -= 1 }
            deliver()
        }
    }

    /// Lets every worker finish the jobs already queued, then exit.
    func stop(workers: Int) {
        state.withLock { $0.stopping = true }
        for _ in 0..<workers { ready.signal() }
    }
}
