import CairnStore
@testable import CairnSync
import CairnTestSupport
import Foundation
import Synchronization
import Testing

/// A spare copy still running when the next sync attempt comes. A test index is copied before
/// anything could be asked of it, so the copy is held at its start (`beforeSpareCopy`) until
/// the test lets it go, or until it is stopped: the one thing here that is not produced for
/// real is the copy's length.
@Suite("A spare copy in flight", .offCooperativePool)
struct SpareCopyInFlightTests {
    /// Holds each copy that reaches it until `open()`, or until that copy is stopped.
    final class Gate: Sendable {
        private let state = Mutex<(flags: [SpareCopy.Flag], open: Bool)>(([], false))
        var started: Int { state.withLock { $0.flags.count } }
        func open() {
            let flags = state.withLock { state in
                state.open = true
                return state.flags
            }
            for flag in flags { flag.wake() }
        }
        /// On the copy's thread, not the test's.
        func enter(_ flag: SpareCopy.Flag) {
            state.withLock { $0.flags.append(flag) }
            flag.wait { state.withLock { $0.open } }
        }
    }

    @Test("Given a spare copy in flight, when a sync attempt finds nothing new, then the copy goes on (it is not cut and started over) and ends ready")
    func attemptWithNothingNewLeavesTheCopy() async throws {
        let (_, device) = try await SpareIndexTests.installedWithSpare()
        let spare = SpareIndexTests.spare(device, 1)
        #expect(unlink(spare) == 0)
        let gate = Gate()
        defer { gate.open() }  // a test that fails early leaves no copy waiting
        await device.syncer.setBeforeSpareCopy { gate.enter($0) }
        // The attempt's end starts the copy, which the gate holds.
        #expect(await device.syncer.syncOnce().isUpToDate)
        try await waitUntil("the copy starts") { gate.started == 1 }
        #expect(await device.syncer.syncOnce().isUpToDate)
        gate.open()
        await device.syncer.spareFinished()
        #expect(gate.started == 1, "the copy was cut and started over")
        #expect(FileManager.default.contentsEqual(atPath: spare, andPath: device.path + "/versions/1/index.sqlite"))
    }
}
