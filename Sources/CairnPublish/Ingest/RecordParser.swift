import CairnCore
import Foundation
import CairnStore

/// Turns JSON records into chunks: Cairn's `{id, title, content, scenario?, tags?, source?}`
/// and BEIR's `{_id, title?, text, metadata?}` (a record with `_id` or `text` is BEIR).
enum RecordParser {
    static let cairnFields: Set<String> = ["id", "title", "content", "scenario", "tags", "source"]
    static let beirFields: Set<String> = ["_id", "title", "text", "metadata"]

    /// A `.json` file: an array of records.
    static func jsonArray(_ bytes: [UInt8], file: String) throws(PublishError) -> [(String, Chunk)] {
        _ = try TextDecoding.utf8(bytes, file: file)
        let value = try parseJSON(bytes, file: file, position: nil)
        guard let items = value as? [Any] else {
            throw .badInput(file, nil, "a .json source must be an array of records (use .jsonl for one record per line)")
        }
        var chunks: [(String, Chunk)] = []
        for (index, item) in items.enumerated() {
            chunks.append(try record(item, file: file, position: "index \(index)"))
        }
        return chunks
    }

    /// The longest line a `.jsonl` source may hold: a record is far shorter, and a longer line
    /// is a whole file on one line (a minified array, or CR line ends), which would otherwise be
    /// gathered whole in memory before being refused.
    static let maxLineBytes = 64 << 20

    /// The records of the `.jsonl` file at `path`, one line at a time (read a megabyte at a
    /// time: the file is never held whole), each with its position (`line 7`).
    static func forEachLine(of path: String, _ body: (String, Chunk) throws(PublishError) -> Void) throws(PublishError) {
        var pending: [UInt8] = []
        var number = 0
        func line(_ bytes: ArraySlice<UInt8>) throws(PublishError) {
            number += 1
            let position = "line \(number)"
            // Also a NUL: UTF-16 without a byte order mark, which the JSON parser would otherwise
            // read as UTF-16 a line at a time.
            _ = try TextDecoding.utf8(bytes, file: path, firstLine: number, atFileStart: number == 1)
            if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
            let (where_, chunk) = try record(try parseJSON(Array(bytes), file: path, position: position), file: path, position: position)
            try body(where_, chunk)
        }
        try forEachBlock(of: path) { block throws(PublishError) in
            // What `pending` holds was searched already: only the new block is (a long line
            // searched again from its start at every block took time quadratic in its length).
            var searched = pending.endIndex
            pending += block
            var start = pending.startIndex
            while let end = pending[max(start, searched)...].firstIndex(of: UInt8(ascii: "\n")) {
                try line(pending[start..<end])
                start = end + 1
                searched = start
            }
            pending.removeSubrange(..<start)
            guard pending.count <= maxLineBytes else {
                throw .badInput(path, "line \(number + 1)", "longer than \(maxLineBytes >> 20) MiB: a .jsonl source holds one record per line, with LF line ends (a JSON array belongs in a .json file)")
            }
            return true
        }
        try line(pending[...])
    }

    /// The file at `path` a megabyte at a time, until it ends or `body` returns false.
    private static func forEachBlock(of path: String, _ body: (ArraySlice<UInt8>) throws(PublishError) -> Bool) throws(PublishError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .reading(path) }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw .reading(path) }
            guard count > 0, try body(buffer[..<count]) else { return }
        }
    }

    /// The records of the `.json` file at `path`, an array of records, one at a time, each
    /// with its position (`index 7`): read a megabyte at a time and each record parsed on its
    /// own, so that an array of a million records is never held whole (a publish reads the
    /// source two or three times). A file whose first value is not an array is read whole and
    /// refused as `jsonArray` refuses it. A record over `maxLineBytes` is refused.
    static func forEachArrayRecord(of path: String, _ body: (String, Chunk) throws(PublishError) -> Void) throws(PublishError) {
        enum Place { case start, beforeRecord(first: Bool), inRecord, afterRecord, end, notAnArray }
        var place = Place.start
        var record: [UInt8] = []
        // Within a record: its nesting, and whether a string is open (and an escape in it). A
        // record that is no object, array or string ends at a comma, `]` or white space.
        var (depth, inString, escaped, bare) = (0, false, false, false)
        var (index, line, recordLine, offset, mark) = (0, 1, 1, 0, 0)
        let (comma, open, close, quote, backslash) = (UInt8(ascii: ","), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "\""), UInt8(ascii: "\\"))
        func invalid(_ what: String) -> PublishError { .badInput(path, "line \(line)", "not valid JSON: \(what)") }
        func emit() throws(PublishError) {
            let position = "index \(index)"
            _ = try TextDecoding.utf8(record, file: path, firstLine: recordLine, atFileStart: false)
            let value = try parseJSON(record, file: path, position: position, firstLine: recordLine)
            let (where_, chunk) = try Self.record(value, file: path, position: position)
            try body(where_, chunk)
            index += 1
            record.removeAll(keepingCapacity: true)
        }
        func take(_ byte: UInt8) throws(PublishError) {
            let white = byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
            switch place {
            case .start:
                // A byte order mark (its three bytes first, or none), then white space, then the
                // array. Anything else, a part of the mark too, is read whole and refused so.
                if offset == mark, mark < 3, [0xEF, 0xBB, 0xBF][mark] == byte {
                    mark += 1
                    return
                }
                if mark % 3 != 0 { place = .notAnArray; return }
                if white { return }
                place = byte == open ? .beforeRecord(first: true) : .notAnArray
            case .beforeRecord(let first):
                if white { return }
                if byte == close, first { place = .end; return }
                if byte == close || byte == comma { throw invalid("a record is missing before `\(Character(Unicode.Scalar(byte)))`") }
                (record, recordLine) = ([byte], line)
                (depth, inString, escaped) = (byte == UInt8(ascii: "{") || byte == open ? 1 : 0, byte == quote, false)
                bare = depth == 0 && !inString
                place = .inRecord
            case .inRecord:
                if bare, white || byte == comma || byte == close {
                    place = .afterRecord
                    return try take(byte)
                }
                record.append(byte)
                guard record.count <= maxLineBytes else {
                    throw .badInput(path, "index \(index)", "a record longer than \(maxLineBytes >> 20) MiB; split it")
                }
                if bare { return }
                if inString {
                    if escaped { escaped = false } else if byte == backslash { escaped = true } else if byte == quote {
                        inString = false
                        if depth == 0 { place = .afterRecord }
                    }
                    return
                }
                switch byte {
                case quote: inString = true
                case UInt8(ascii: "{"), open: depth += 1
                case UInt8(ascii: "}"), close:
                    depth -= 1
                    if depth == 0 { place = .afterRecord }
                default: break
                }
            case .afterRecord:
                if white { return }
                guard byte == comma || byte == close else { throw invalid("`,` or `]` expected after record \(index)") }
                try emit()
                place = byte == comma ? .beforeRecord(first: false) : .end
            case .end:
                if !white { throw invalid("something follows the array's closing `]`") }
            case .notAnArray:
                return
            }
        }
        try forEachBlock(of: path) { block throws(PublishError) in
            for byte in block {
                try take(byte)
                if case .notAnArray = place { return false }
                if byte == 0x0A { line += 1 }
                offset += 1
            }
            return true
        }
        switch place {
        case .end:
            return
        case .start where mark % 3 == 0:
            // Nothing but white space (and a whole byte order mark): no records, as `[]` or an
            // empty .jsonl file holds (said by the reader), not JSON refused.
            return
        case .start, .notAnArray:
            // Not an array (an object, a value, nothing): read whole, as before, for its message.
            let bytes: [UInt8]
            do { bytes = try FileSystem.read(path) } catch { throw PublishError(.io, error.message, cause: error) }
            for (position, chunk) in try jsonArray(bytes, file: path) { try body(position, chunk) }
        default:
            throw invalid("the file ends before the array's closing `]`")
        }
    }

    /// A leading UTF-8 byte order mark (a `.json` file's, a `.jsonl` file's first line) is skipped.
    /// `firstLine`: the file's line `bytes` start on (a record of a streamed array), so that the
    /// place an error names is the file's.
    static func parseJSON(_ bytes: [UInt8], file: String, position: String?, firstLine: Int = 1) throws(PublishError) -> Any {
        let body = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? bytes[3...] : bytes[...]
        do {
            let value = try JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed])
            // Foundation keeps one of a repeated key's values silently (`"id"` twice: which id?).
            if CanonicalJSON.checkKeys(body, maxBytes: .max) == .repeated {
                throw PublishError.badInput(file, position, "an object names a key twice; which value counts would be the parser's choice")
            }
            return value
        } catch let error as PublishError {
            throw error
        } catch {
            // Keep only the location from Foundation's message: it may quote document text.
            let text = "\(error)"
            let location = text.firstMatch(of: /line (\d+), column (\d+)/).map { match in
                let line = (Int(match.1) ?? 1) + firstLine - 1
                // The column counts from the record's start on its first line.
                return line == firstLine && firstLine > 1 ? " near line \(line)" : " near line \(line), column \(match.2)"
            } ?? ""
            throw .badInput(file, position, "not valid JSON\(location)")
        }
    }

    /// One record, named in errors by `position` (and by its id once known).
    static func record(_ value: Any, file: String, position: String) throws(PublishError) -> (String, Chunk) {
        guard let object = value as? [String: Any] else { throw .badInput(file, position, "a record must be a JSON object") }
        let isBEIR = object["_id"] != nil || (object["text"] != nil && object["content"] == nil)
        var where_ = position
        func string(_ key: String, required: Bool) throws(PublishError) -> String? {
            guard let raw = object[key], !(raw is NSNull) else {
                if required { throw .badInput(file, where_, "missing `\(key)`") }
                return nil
            }
            guard let text = raw as? String else { throw .badInput(file, where_, "`\(key)` must be a string") }
            return text
        }
        let idKey = isBEIR ? "_id" : "id", contentKey = isBEIR ? "text" : "content"
        let id = try string(idKey, required: true)!
        guard !id.isEmpty else { throw .badInput(file, where_, "`\(idKey)` is empty") }
        if let control = TextDecoding.firstControlCharacter(id) {
            throw .badInput(file, position, "`\(idKey)` holds the control character \(control): an id is named in one-line errors and logs; take it out")
        }
        where_ = "\(position) (id \"\(id)\")"
        let allowed = isBEIR ? beirFields : cairnFields
        if let unknown = object.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw .badInput(file, where_, "unknown field `\(unknown)`\(isBEIR ? " in a BEIR record" : "")")
        }
        let content = try string(contentKey, required: true)!
        guard content.contains(where: { !$0.isWhitespace }) else { throw .badInput(file, where_, "`\(contentKey)` is empty") }
        let title = try string("title", required: !isBEIR) ?? ""
        var tags: [String] = []
        if !isBEIR, let raw = object["tags"], !(raw is NSNull) {
            guard let list = raw as? [Any], let strings = list as? [String], list.allSatisfy({ $0 is String }) else {
                throw .badInput(file, where_, "`tags` must be an array of strings")
            }
            tags = strings
        }
        let scenario = isBEIR ? nil : try string("scenario", required: false)
        let source = isBEIR ? nil : try string("source", required: false)
        return (where_, Chunk(id: id, title: title, content: content, scenario: scenario, tags: tags, source: source))
    }
}
