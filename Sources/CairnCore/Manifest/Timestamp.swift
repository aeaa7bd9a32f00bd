public import Foundation

/// A UTC instant with whole seconds, written as RFC 3339 `YYYY-MM-DDTHH:MM:SSZ` (exactly that
/// shape: no fraction, no offset other than `Z`), so each instant has one spelling.
public struct Timestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Seconds since 1970-01-01T00:00:00Z.
    public let secondsSince1970: Int64

    /// Years 0000 through 9999, the range the four-digit form can spell.
    static let range: ClosedRange<Int64> = -62_167_219_200...253_402_300_799

    public init?(secondsSince1970: Int64) {
        guard Self.range.contains(secondsSince1970) else { return nil }
        self.secondsSince1970 = secondsSince1970
    }

    /// The instant `date`, truncated to whole seconds (towards the past).
    public init?(_ date: Date) {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        guard seconds.isFinite, let whole = Int64(exactly: seconds) else { return nil }
        self.init(secondsSince1970: whole)
    }

    /// The instant `date`, or the nearest one in range: a clock past 9999 is the last second of
    /// 9999, not 1970 (which would make every expiry lie in the future).
    public init(clamping date: Date) {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        let bound = seconds.isNaN ? 0 : min(max(seconds, Double(Self.range.lowerBound)), Double(Self.range.upperBound))
        self.secondsSince1970 = Int64(bound)
    }

    /// Parses exactly `YYYY-MM-DDTHH:MM:SSZ` with a valid calendar date and time (no leap second).
    public init?(rfc3339 text: String) {
        let b = Array(text.utf8)
        guard b.count == 20, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] == UInt8(ascii: "T"),
              b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"), b[19] == UInt8(ascii: "Z") else { return nil }
        func number(_ from: Int, _ count: Int) -> Int64? {
            var value: Int64 = 0
            for byte in b[from..<from + count] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2),
              let hour = number(11, 2), let minute = number(14, 2), let second = number(17, 2),
              (1...12).contains(month), (1...Self.daysIn(month: month, year: year)).contains(day),
              hour < 24, minute < 60, second < 60 else { return nil }
        let days = Self.daysFromCivil(year: year, month: month, day: day)
        self.init(secondsSince1970: days * 86_400 + hour * 3_600 + minute * 60 + second)
    }

    /// The RFC 3339 spelling, e.g. `2026-11-21T20:00:00Z`.
    public var rfc3339: String {
        let days = secondsSince1970 >= 0 ? secondsSince1970 / 86_400 : (secondsSince1970 - 86_399) / 86_400
        let rest = secondsSince1970 - days * 86_400
        let (year, month, day) = Self.civilFromDays(days)
        func pad(_ value: Int64, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(rest / 3_600, 2)):\(pad(rest / 60 % 60, 2)):\(pad(rest % 60, 2))Z"
    }

    /// The same instant as a Foundation `Date`.
    public var date: Date { Date(timeIntervalSince1970: TimeInterval(secondsSince1970)) }

    /// Seconds from this stamp to `now` on the wall clock; nil for a stamp more than a minute
    /// ahead of it (written while the clock ran ahead, or a clock without a battery back at
    /// 1970): it has no age, neither recent nor old.
    public func age(at now: Date) -> TimeInterval? {
        let age = now.timeIntervalSince(date)
        return age >= -60 ? age : nil
    }

    public var description: String { rfc3339 }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool { lhs.secondsSince1970 < rhs.secondsSince1970 }

    static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    // Howard Hinnant's days_from_civil / civil_from_days (proleptic Gregorian calendar).
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civilFromDays(_ days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
