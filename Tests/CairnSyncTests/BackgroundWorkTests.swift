import CairnThreads
@testable import CairnSync
import Foundation
import Testing

@Suite("BackgroundWork: install threads run below the queries")
struct BackgroundWorkTests {
    static func niceValue() -> Int32 { getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0) }

    @Test("Given a caller at some nice value, when work runs in the background, then its thread is 10 nicer (19 at most)")
    func relativeNiceness() async {
        let caller = Self.niceValue()
        let inside = await BackgroundWork.run { () -> Int32 in Self.niceValue() }
        #expect(inside == min(19, caller + 10))
    }

    /// A test's "restart" drops its data directory (and its lock) and opens the folder again:
    /// the work's thread must not still hold it when the caller goes on.
    @Test("Given work that captures an object, when the caller resumes, then the work no longer holds it")
    func releasesBeforeResuming() async {
        final class Held: Sendable {}
        weak var weakly: Held?
        do {
            let held = Held()
            weakly = held
            await BackgroundWork.run { withExtendedLifetime(held) {} }
        }
        #expect(weakly == nil)
    }

    @Test("Given nice values across the range, then install threads are 10 nicer, capped at 19")
    func cap() {
        #expect(BackgroundWork.niceness(below: 0) == 10)
        #expect(BackgroundWork.niceness(below: 5) == 15)
        #expect(BackgroundWork.niceness(below: 10) == 19)
        #expect(BackgroundWork.niceness(below: -5) == 5)
    }
}
