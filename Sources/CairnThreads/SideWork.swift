public import Dispatch

/// Work started at once on a thread of Dispatch's global pool (not Swift's cooperative pool),
/// whose result the starting thread takes when it needs it: two parts of one request at once,
/// without the cost of a new thread (a search's lexical part beside its dense part).
public final class SideWork<T: Sendable>: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    // Written once by the worker before `done` is signalled; read only after waiting for it.
    private var result: T?
    private var waited = false

    public init(qos: DispatchQoS.QoSClass = .userInitiated, _ body: @escaping @Sendable () -> T) {
        DispatchQueue.global(qos: qos).async { [self] in
            result = body()
            done.signal()
        }
    }

    /// Blocks until the work is done and returns its result; later calls return it at once.
    /// Call from one thread only (the one that started the work).
    public func wait() -> T {
        if !waited {
            done.wait()
            waited = true
        }
        return result!
    }
}
