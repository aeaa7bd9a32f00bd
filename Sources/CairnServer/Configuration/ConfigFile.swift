import CairnCore
import Foundation

/// The config file format: one `key = value` per line; blank lines and lines starting with `#`
/// are ignored, as is anything after ` #` on a line. Keys are lowercase words with `_`; values
/// are taken verbatim after trimming (no quoting, so a value cannot contain ` #`).
enum ConfigFile {
    struct Entry: Equatable {
        var key: String
        var value: String
        var line: Int
    }

    static func parse(_ text: String) throws(ServerError) -> [Entry] {
        var entries: [Entry] = []
        for (index, raw) in TextLines.of(text).enumerated() {
            var line = Substring(raw)
            if let comment = line.range(of: " #") { line = line[..<comment.lowerBound] }
            let trimmed = line.trimmingWhitespace()
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            guard let equals = trimmed.firstIndex(of: "=") else {
                throw ServerError(.configurationInvalid, "line \(index + 1): expected 'key = value'")
            }
            let key = trimmed[..<equals].trimmingWhitespace()
            let value = trimmed[trimmed.index(after: equals)...].trimmingWhitespace()
            guard !key.isEmpty, key.allSatisfy({ $0 == "_" || ($0.isASCII && ($0.isLowercase || $0.isNumber)) }) else {
                throw ServerError(.configurationInvalid, "line \(index + 1): a key is lowercase letters, digits and '_'")
            }
            entries.append(Entry(key: String(key), value: String(value), line: index + 1))
        }
        return entries
    }
}

extension Substring {
    func trimmingWhitespace() -> Substring {
        var s = self
        while let first = s.first, first.isWhitespace { s = s.dropFirst() }
        while let last = s.last, last.isWhitespace { s = s.dropLast() }
        return s
    }
}
