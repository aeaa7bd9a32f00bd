import Foundation
import Testing
@testable import CairnCore

@Suite struct CanaryTests {
    @Test func givenACanariesFile_whenParsed_thenDefaultsApply() throws {
        let text = #"[{"query":"boil water","expect":["water-001"]},{"query":"smoke","expect":["fire-003","fire-004"],"k":10,"mode":"lexical"}]"#
        let canaries = try Canary.parseFile(Array(text.utf8))
        #expect(canaries == [Canary(query: "boil water", expect: ["water-001"], k: 5, mode: "hybrid"),
                             Canary(query: "smoke", expect: ["fire-003", "fire-004"], k: 10, mode: "lexical")])
    }

    @Test(arguments: [
        #"{"query":"q","expect":[]}"#, #"[{"expect":[]}]"#, #"[{"query":"q","expect":[1]}]"#,
        #"[{"query":"q","expect":[],"k":0}]"#, #"[{"query":"q","expect":[],"k":2.5}]"#,
        #"[{"query":"q","expect":[],"mode":"fuzzy"}]"#, #"[{"query":"q","expect":[],"extra":1}]"#,
    ])
    func givenABadCanariesFile_whenParsed_thenRefusedWithoutEchoingTheQuery(text: String) {
        let error = coreError { _ = try Canary.parseFile(Array(text.utf8)) }
        #expect(error?.code == .canaryMalformed || error?.code == .jsonMalformed)
        #expect(error?.message.contains("\"q\"") == false)
    }
}

@Suite struct TimestampTests {
    @Test(arguments: ["2026-11-21T20:00:00Z", "1970-01-01T00:00:00Z", "2000-02-29T23:59:59Z", "0000-01-01T00:00:00Z",
                      "9999-12-31T23:59:59Z", "1969-12-31T23:59:59Z"])
    func givenAValidTime_whenParsed_thenItRoundTripsAndAgreesWithFoundation(text: String) throws {
        let timestamp = try #require(Timestamp(rfc3339: text))
        #expect(timestamp.rfc3339 == text)
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text), !text.hasPrefix("0000") {
            #expect(timestamp.date == date)
            #expect(Timestamp(date) == timestamp)
        }
    }

    @Test(arguments: ["2026-11-21T20:00:00", "2026-11-21T20:00:00.5Z", "2026-11-21T20:00:00+00:00", "2026-13-01T00:00:00Z",
                      "2026-02-29T00:00:00Z", "2026-11-21T24:00:00Z", "2026-11-21T23:59:60Z", "2026-11-21 20:00:00Z",
                      "20261121T200000Z", "2026-11-21t20:00:00z", "２026-11-21T20:00:00Z"])
    func givenAnInvalidTime_whenParsed_thenNil(text: String) {
        #expect(Timestamp(rfc3339: text) == nil)
    }

    @Test func givenAManifest_whenCheckedForExpiry_thenExpiresIsTheFirstExpiredSecond() throws {
        let manifest = try SignedManifest.decodeAndVerify(try protocolFile("vectors/manifest.json"),
                                                          trustedKeys: [try testPublisherKey().publicKey])
        #expect(!manifest.isExpired(at: Timestamp(secondsSince1970: manifest.expires.secondsSince1970 - 1)!))
        #expect(manifest.isExpired(at: manifest.expires))
    }

    @Test("Given a clock past year 9999, before year 0 or not a number, when taken as a timestamp, then it is the nearest second in range (never 1970, which would put every expiry in the future)")
    func clockOutOfRangeIsClamped() {
        #expect(Timestamp(Date(timeIntervalSince1970: 3e11)) == nil)
        #expect(Timestamp(clamping: Date(timeIntervalSince1970: 3e11)).rfc3339 == "9999-12-31T23:59:59Z")
        #expect(Timestamp(clamping: Date(timeIntervalSince1970: -1e12)).rfc3339 == "0000-01-01T00:00:00Z")
        #expect(Timestamp(clamping: Date(timeIntervalSince1970: 1_780_000_000.7)).secondsSince1970 == 1_780_000_000)
        #expect(Timestamp(clamping: Date(timeIntervalSince1970: .nan)).secondsSince1970 == 0)
    }
}
