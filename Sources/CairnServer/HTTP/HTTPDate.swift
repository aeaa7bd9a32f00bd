import Foundation

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the only date form servers send (RFC 9110 §5.6.7).
enum HTTPDate {
    static func format(_ secondsSince1970: Int) -> String {
        var time = time_t(secondsSince1970)
        var parts = tm()
        gmtime_r(&time, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Parses IMF-fixdate; nil for anything else (the header is then ignored, as RFC 9110 says).
    static func parse(_ text: String) -> Int? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT",
              let day = Int(parts[1]), let month = months.firstIndex(of: String(parts[2])), let year = Int(parts[3])
        else { return nil }
        let clock = parts[4].split(separator: ":").compactMap { Int($0) }
        guard clock.count == 3, (1...31).contains(day), (0...23).contains(clock[0]), (0...59).contains(clock[1]),
              (0...60).contains(clock[2]), year >= 1970
        else { return nil }
        var fields = tm()
        fields.tm_year = Int32(year - 1900)
        fields.tm_mon = Int32(month)
        fields.tm_mday = Int32(day)
        fields.tm_hour = Int32(clock[0])
        fields.tm_min = Int32(clock[1])
        fields.tm_sec = Int32(clock[2])
        return Int(timegm(&fields))
    }
}
