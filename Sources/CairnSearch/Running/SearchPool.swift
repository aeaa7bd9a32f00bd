public import CairnThreads

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
    private let pool: BoundedThreadPool
    public var threads: Int { pool.threads }
    /// Searches waiting or running, and searches finished (the watchdog's liveness check).
    public var load: BoundedThreadPool.Load { pool.load }

    public init(threads: Int, queueLimit: Int) {
        pool = BoundedThreadPool(threads: threads, queueLimit: queueLimit)
    }

    /// Runs `job` on a worker and returns its result; throws `APIError.busy` when the queue is
    /// full, or what `job` throws.
    public func run<T: Sendable>(_ job: @escaping @Sendable () throws(APIError) -> T) async throws(APIError) -> T {
        try await pool.run(busy: APIError.busy, job)
    }
}
