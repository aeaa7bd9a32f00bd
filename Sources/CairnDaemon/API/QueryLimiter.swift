import Synchronization

/// Bounds concurrent searches: at most `slots` run, at most `queueLimit` wait (first come,
/// first served); beyond that a search is refused at once, so a flood of requests gets quick
/// 503s instead of unbounded memory and latency.
final class QueryLimiter: Sendable {
    private struct State {
        var free: Int
        /// Waiting searches; each is resumed with `false` (= not refused) when it gets a slot.
        var waiters: [CheckedContinuation<Bool, Never>] = []
        var head = 0  // index of the first waiter not yet resumed
        var waiting: Int { waiters.count - head }
    }

    private let state: Mutex<State>
    private let queueLimit: Int

    init(slots: Int, queueLimit: Int) {
        state = Mutex(State(free: max(1, slots)))
        self.queueLimit = max(0, queueLimit)
    }

    /// Runs `body` in a slot, or throws `APIError.busy` when the queue is full. A waiter is
    /// not cancellable: it gets its slot when a running search ends (searches are short).
    func withSlot<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        let refused = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let immediate: Bool? = state.withLock { state in
                if state.free > 0 { state.free -= 1; return false }
                guard state.waiting < queueLimit else { return true }
                state.waiters.append(continuation)
                return nil
            }
            if let immediate { continuation.resume(returning: immediate) }
        }
        if refused { throw APIError.busy }
        defer { release() }
        return try await body()
    }

    /// Hands the slot to the first waiter, or frees it.
    private func release() {
        let next: CheckedContinuation<Bool, Never>? = state.withLock { state in
            guard state.waiting > 0 else { state.free += 1; return nil }
            let waiter = state.waiters[state.head]
            state.head += 1
            if state.head >= 64, state.head * 2 >= state.waiters.count {
                state.waiters.removeFirst(state.head)
                state.head = 0
            }
            return waiter
        }
        next?.resume(returning: false)
    }
}
