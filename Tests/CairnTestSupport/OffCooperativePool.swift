import Dispatch
public import Testing

/// A test trait that runs a test's body, and every task it starts, off Swift's cooperative
/// pool.
///
/// The cooperative pool has one thread per core (two here). A test that waits on a child
/// process (`Process.waitUntilExit`, a pipe read, a blocking socket client, a polling loop
/// with `usleep`) holds one of those threads for as long as it waits; with the suite running
/// in parallel, two such waits stop every other test's in-process server and sync loop. Under
/// this trait each piece of the test's work runs on a thread of Dispatch's overcommit pool,
/// which adds a thread whenever one blocks, so a waiting test never takes a cooperative
/// thread from the others.
///
/// Use it on every suite whose tests wait, with a deadline, on a real process or on an
/// in-process server or sync loop: `@Suite(..., .offCooperativePool)`. (A sync loop waited on
/// from the cooperative pool queues behind every CPU-bound test running beside it: alone it
/// installs in 0.2 s, in the parallel suite it missed a 20 s deadline.)
public struct OffCooperativePool: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        // The suite itself needs no scope: each of its tests gets one (the trait is recursive).
        guard testCase != nil || !test.isSuite else { return try await function() }
        try await withTaskExecutorPreference(OverflowExecutor.shared) { try await function() }
    }
}

extension Trait where Self == OffCooperativePool {
    /// Runs the test off Swift's cooperative pool (see `OffCooperativePool`).
    public static var offCooperativePool: Self { OffCooperativePool() }
}

/// A task executor whose every job runs on a serial queue of its own. A serial queue draws its
/// thread from Dispatch's overcommit pool, which grows when its threads block (unlike the
/// cooperative pool, whose width is the core count), so a job that blocks delays no other.
final class OverflowExecutor: TaskExecutor {
    static let shared = OverflowExecutor()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        DispatchQueue(label: "cairn.test.job").async { job.runSynchronously(on: executor) }
    }
}
