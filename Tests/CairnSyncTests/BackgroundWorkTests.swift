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

    @Test("Given nice values across the range, then install threads are 10 nicer, capped at 19")
    func cap() {
        #expect(BackgroundWork.niceness(below: 0) == 10)
        #expect(BackgroundWork.niceness(below: 5) == 15)
        #expect(BackgroundWork.niceness(below: 10) == 19)
        #expect(BackgroundWork.niceness(below: -5) == 5)
    }
}
