import CairnTestSupport
import Foundation
import Testing
@testable import CairnSync

/// The order an attempt asks its sources in (`Syncer.order`): a source whose blob failed its
/// hash goes last for a day.
@Suite("Source order")
struct SourceOrderTests {
    @Test("Given a source whose blob failed its hash an hour ago, then it is asked last; a day later, or with the failure stamped ahead of the clock (written while the clock ran years ahead), in its configured place")
    func mismatchDemotion() {
        let now = Date(timeIntervalSince1970: 1_780_000_000)
        func order(failedAt: Date) -> [String] {
            var state = SyncState()
            state.withSource("https://mirror") { $0.lastHashMismatch = SyncState.time(failedAt) }
            return Syncer.order(["https://mirror", "https://origin"], state: state, now: now)
        }
        #expect(order(failedAt: now.addingTimeInterval(-3600)) == ["https://origin", "https://mirror"])
        #expect(order(failedAt: now.addingTimeInterval(-2 * 86400)) == ["https://mirror", "https://origin"])
        // Before 2026-12-06 a stamp ahead of the clock demoted the source until the clock passed it.
        #expect(order(failedAt: now.addingTimeInterval(4 * 365 * 86400)) == ["https://mirror", "https://origin"])
    }
}
