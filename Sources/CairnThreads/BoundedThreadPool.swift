import Dispatch
import Foundation
import Synchronization

/// A fixed number of threads of its own that run jobs in order, never on Swift's cooperative
/// pool, with a bounded queue: at most `threads` jobs run and at most `queueLimit` wait (first
/// come, first served); beyond that `run` refuses at once with the caller's `busy` error, so a
/// flood gets quick refusals instead of unbounded memory and latency. A waiting job is not
/// cancellable: it runs when a worker is free. Used for searches (`SearchPool`).
public final class BoundedThreadPool: Sendable {
    private let queue: JobQueue
    public let threads: Int

    /// - Parameter stackSize: each worker's stack, in bytes.
    public init(threads: Int, queueLimit: Int, stackSize: Int = 8 << 20) {
        self.threads = max(1, threads)
        queue = JobQueue(capacity: self.threads + max(0, queueLimit))
        for _ in 0..<self.threads {
            let worker = Thread { [queue] in queue.work() }
            worker.stackSize = stackSize
            worker.start()
        }
    }

    deinit { queue.stop(workers: threads) }

    /// Jobs waiting or running now, and jobs finished since the pool started.
    public struct Load: Sendable, Equatable {
        public var pending: Int
        public var finished: Int

        public init(pending: Int, finished: Int) {
            self.pending = pending
            self.finished = finished
        }

        /// Whether jobs were pending at both readings and none finished between them: the
        /// workers are stuck (a job that never returns on every worker), not busy.
        public static func stalled(from earlier: Load, to later: Load) -> Bool {
            earlier.pending > 0 && later.pending > 0 && later.finished == earlier.finished
        }
    }

    /// The pool's load now.
    public var load: Load { queue.load }

    /// Runs `job` on a worker and returns its result; throws `busy` when the queue is full, or
    /// what `job` throws. The caller suspends meanwhile, holding no thread.
    public func run<T: Sendable, E: Error>(busy: E, _ job: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, E>, Never>) in
            let accepted = queue.push {
                let result = Result { () throws(E) -> T in try job() }
                // Handed back only after the worker's slot is free again (see JobQueue.work), so
                // a caller that runs again as soon as it has its answer is not refused as busy.
                return { continuation.resume(returning: result) }
            }
            if !accepted { continuation.resume(returning: .failure(busy)) }
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
        /// Jobs run to their end since the pool started.
        var finished = 0
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
            state.withLock {
                $0.admitted -= 1
                $0.finished += 1
            }
            deliver()
        }
    }

    var load: BoundedThreadPool.Load {
        state.withLock { BoundedThreadPool.Load(pending: $0.admitted, finished: $0.finished) }
    }

    /// Lets every worker finish the jobs already queued, then exit.
    func stop(workers: Int) {
        state.withLock { $0.stopping = true }
        for _ in 0..<workers { ready.signal() }
    }
}
