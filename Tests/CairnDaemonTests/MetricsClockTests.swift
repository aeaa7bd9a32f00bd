import CairnClient
@testable import CairnDaemon
import Foundation
import Testing

/// `cairnd_seconds_since_last_check` against the wall clock: a fleet's alerts read it, and a
/// device's clock may run behind a stamp it wrote (no battery: back at 1970 at each boot).
@Suite("Metrics: the age of the last check")
struct MetricsClockTests {
    static func age(lastCheck: String?, now: Date) -> String? {
        var status = DaemonStatus.Sync()
        status.lastCheck = lastCheck
        let text = String(decoding: DaemonMetrics(channel: "field").exposition(status: status, version: 1, now: now), as: UTF8.self)
        return text.split(separator: "\n").first { $0.hasPrefix("cairnd_seconds_since_last_check{") }
            .flatMap { $0.split(separator: " ").last.map(String.init) }
    }

    @Test("Given a last check an hour ago, a few seconds ahead, a year ahead of the clock, or none, then the gauge says 3600, 0, -1 (unknown, not just now) and -1")
    func ageOfTheLastCheck() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(Self.age(lastCheck: "2027-01-15T07:00:00Z", now: now) == "3600.0")
        #expect(Self.age(lastCheck: "2027-01-15T08:00:05Z", now: now) == "0.0")
        #expect(Self.age(lastCheck: "2028-01-15T08:00:00Z", now: now) == "-1.0")
        #expect(Self.age(lastCheck: nil, now: now) == "-1.0")
    }
}
