@testable import CairnIndex
import Testing

/// `Snapshot.ReadAhead.Plan`: the pass over an installed index's rows asks for its share of the
/// file a window ahead of where its rows are, each byte once, and no further. (What the kernel
/// then reads is its own affair: a WILLNEED is a hint it may drop under pressure, so it is not
/// asserted here; `scripts/bench scale` shows the effect.)
@Suite struct ScanReadAheadTests {
    @Test("Given a part's share of the file, when its rows are done, then the window past their estimated end is asked for once, and nothing beyond the share")
    func asksForAWindowAhead() {
        // The second of two parts of a file of 1,000 bytes: bytes 500 to 999, a window of 100.
        var plan = Snapshot.ReadAhead.Plan(start: 500, end: 1000, window: 100)
        #expect(plan.next(done: 0, of: 100) == 500..<600)
        // Half the rows done: the share's middle, 750, and a window past it.
        #expect(plan.next(done: 50, of: 100) == 600..<850)
        // Less than a quarter of a window new: nothing.
        #expect(plan.next(done: 52, of: 100) == nil)
        #expect(plan.next(done: 56, of: 100) == 850..<880)
        // Near the end, the rest of the share, whatever is left of it, then nothing.
        #expect(plan.next(done: 99, of: 100) == 880..<1000)
        #expect(plan.next(done: 100, of: 100) == nil)
        #expect(plan.requested == 1000)
    }

    @Test("Given a part with no rows or more rows done than it has, then the plan stays within its share")
    func staysWithinTheShare() {
        var plan = Snapshot.ReadAhead.Plan(start: 0, end: 50, window: 100)
        #expect(plan.next(done: 0, of: 0) == 0..<50)
        #expect(plan.next(done: 10, of: 0) == nil)
        var other = Snapshot.ReadAhead.Plan(start: 0, end: 1000, window: 100)
        #expect(other.next(done: 500, of: 100) == 0..<1000)
    }
}
