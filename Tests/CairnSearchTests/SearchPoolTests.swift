import CairnSearch
import CairnThreads
import Foundation
import Synchronization
import Testing

@Suite("The search pool")
struct SearchPoolTests {
    @Test("Given a pool, when a search runs, then it runs outside any Swift task (on a pool thread, not the cooperative pool)")
    func ownThreads() async throws {
        let pool = SearchPool(threads: 2, queueLimit: 0)
        #expect(withUnsafeCurrentTask { $0 != nil }, "the test itself runs in a task")
        let inTask = try await pool.run { () throws(APIError) -> Bool in withUnsafeCurrentTask { $0 != nil } }
        #expect(!inTask)
    }

    @Test("Given one thread and no queue, when a second search arrives while the first runs, then it is refused as busy; after, the thread is free again")
    func refusesWhenFull() async throws {
        let pool = SearchPool(threads: 1, queueLimit: 0)
        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        async let first: Int = pool.run { () throws(APIError) -> Int in
            entered.signal()
            release.wait()
            return 1
        }
        await Self.wait(entered)
        await #expect { try await pool.run { () throws(APIError) -> Int in 2 } } throws: { ($0 as? APIError)?.code == "busy" }
        release.signal()
        #expect(try await first == 1)
        #expect(try await pool.run { () throws(APIError) -> Int in 3 } == 3)
    }

    @Test("Given a search that holds the pool's only thread, then its load says one pending and none finished, which two readings call stalled; once it ends, one finished and none pending, which is not")
    func loadForTheWatchdog() async throws {
        let pool = SearchPool(threads: 1, queueLimit: 1)
        #expect(pool.load == .init(pending: 0, finished: 0))
        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        async let held: Int = pool.run { () throws(APIError) -> Int in
            entered.signal()
            release.wait()
            return 1
        }
        await Self.wait(entered)
        let stuck = pool.load
        #expect(stuck == .init(pending: 1, finished: 0))
        // The watchdog's rule (a stuck thread, as a search that never returns would leave it):
        #expect(BoundedThreadPool.Load.stalled(from: stuck, to: pool.load))
        release.signal()
        #expect(try await held == 1)
        #expect(pool.load == .init(pending: 0, finished: 1))
        #expect(!BoundedThreadPool.Load.stalled(from: stuck, to: pool.load))
        // Busy, not stuck: pending at both readings, but one finished between them.
        #expect(!BoundedThreadPool.Load.stalled(from: .init(pending: 3, finished: 7), to: .init(pending: 3, finished: 8)))
    }

    @Test("Given one thread and a queue of one, when a second search arrives, then it waits and runs after the first")
    @available(macOS 26.0, *)  // addImmediateTask
    func queues() async throws {
        let pool = SearchPool(threads: 1, queueLimit: 1)
        let order = Order()
        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let results = try await withThrowingTaskGroup(of: (String, Int).self) { group in
            group.addTask {
                ("first", try await pool.run { () throws(APIError) -> Int in
                    entered.signal()
                    release.wait()
                    return order.next()
                })
            }
            await Self.wait(entered)
            // An immediate child task runs up to its first suspension before this returns, so
            // the second search is handed to the pool now, while the first still runs.
            group.addImmediateTask { ("second", try await pool.run { () throws(APIError) -> Int in order.next() }) }
            // The proof that it waits in the queue: the pool is full (one running, one queued),
            // so a third search is refused at once (0 below; had it been taken, it would run last).
            group.addImmediateTask {
                do { return ("probe", try await pool.run { () throws(APIError) -> Int in order.next() }) } catch {
                    return ("probe", (error as? APIError)?.code == "busy" ? 0 : -1)
                }
            }
            release.signal()
            return try await group.reduce(into: [String: Int]()) { $0[$1.0] = $1.1 }
        }
        #expect(results["probe"] == 0, "a third search was not refused: the second was not waiting in the queue")
        #expect(results["first"] == 1 && results["second"] == 2, "\(results)")
    }

    @Test("Given a job that throws an APIError, when run, then the caller gets that error")
    func passesErrorsOn() async {
        let pool = SearchPool(threads: 1, queueLimit: 0)
        await #expect { try await pool.run { () throws(APIError) -> Int in throw .noIndex } } throws: {
            ($0 as? APIError)?.code == "no_index"
        }
    }

    /// Waits for `semaphore` on a thread of its own (never blocking a cooperative thread).
    static func wait(_ semaphore: DispatchSemaphore) async {
        await withCheckedContinuation { continuation in
            Thread { semaphore.wait(); continuation.resume() }.start()
        }
    }
}

/// Hands out 1, 2, 3… across threads.
final class Order: Sendable {
    private let count = Mutex(0)
    func next() -> Int { count.withLock { $0 += 1; return $0 } }
}
