/// Reads the fields of one JSON object strictly: every read names the field's path in its
/// error, and `finish()` refuses fields nobody read. Errors carry the reader's `code`.
struct JSONObjectReader {
    /// The largest integer any Cairn document carries (2^53, exact in every JSON reader).
    static let maxInteger = 1 << 53

    let members: [String: CanonicalJSON]
    let path: String
    let code: CoreError.Code
    /// The code of a field or a value this build does not know (`finish()`, `oneOf`), which
    /// newer software may have written; nil: `code`. Nested readers inherit it.
    var unknownCode: CoreError.Code?
    private var read: Set<String> = []

    init(_ value: CanonicalJSON, path: String, code: CoreError.Code) throws(CoreError) {
        guard case .object(let members) = value else {
            throw CoreError(code, "\(path.isEmpty ? "document" : "`\(path)`") must be a JSON object")
        }
        self.members = members
        self.path = path
        self.code = code
    }

    func fieldPath(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func failure(_ key: String, _ what: String) -> CoreError {
        CoreError(code, "field `\(fieldPath(key))` \(what)")
    }

    /// A field or value this build does not know, under `unknownCode`.
    private func unknownRefusal(_ message: String) -> CoreError {
        guard let unknownCode, unknownCode != code else { return CoreError(code, message) }
        return CoreError(unknownCode, message + "; newer software than this build wrote it (upgrade), or a publisher that did not raise format_version")
    }

    mutating func optional(_ key: String) -> CanonicalJSON? {
        read.insert(key)
        return members[key]
    }

    mutating func required(_ key: String) throws(CoreError) -> CanonicalJSON {
        guard let value = optional(key) else { throw failure(key, "is missing") }
        return value
    }

    mutating func string(_ key: String) throws(CoreError) -> String {
        guard case .string(let text) = try required(key) else { throw failure(key, "must be a string") }
        return text
    }

    /// A string that must be one of `allowed`.
    mutating func string(_ key: String, oneOf allowed: [String]) throws(CoreError) -> String {
        let text = try string(key)
        guard allowed.contains(where: { Array($0.utf8) == Array(text.utf8) }) else {
            throw unknownRefusal("field `\(fieldPath(key))` must be one of \(allowed.map { "\"\($0)\"" }.joined(separator: ", "))")
        }
        return text
    }

    mutating func integer(_ key: String, in range: ClosedRange<Int> = 0...maxInteger) throws(CoreError) -> Int {
        guard case .integer(let value) = try required(key) else { throw failure(key, "must be an integer") }
        guard let int = Int(exactly: value), range.contains(int) else {
            throw failure(key, "must be in \(range.lowerBound)...\(range.upperBound)")
        }
        return int
    }

    mutating func contentID(_ key: String) throws(CoreError) -> ContentID {
        guard let id = ContentID(hex: try string(key)) else {
            throw failure(key, "must be 64 lowercase hexadecimal digits")
        }
        return id
    }

    /// An RFC 3339 UTC time, exactly `YYYY-MM-DDTHH:MM:SSZ`.
    mutating func timestamp(_ key: String) throws(CoreError) -> Timestamp {
        guard let value = Timestamp(rfc3339: try string(key)) else {
            throw failure(key, "must be an RFC 3339 UTC time like 2026-11-21T20:00:00Z")
        }
        return value
    }

    mutating func array(_ key: String) throws(CoreError) -> [CanonicalJSON] {
        guard case .array(let values) = try required(key) else { throw failure(key, "must be an array") }
        return values
    }

    mutating func strings(_ key: String) throws(CoreError) -> [String] {
        var out: [String] = []
        for (index, value) in try array(key).enumerated() {
            guard case .string(let text) = value else { throw failure("\(key)[\(index)]", "must be a string") }
            out.append(text)
        }
        return out
    }

    /// Each element of the array `key` read by `body` with a reader for `key[i]`.
    mutating func objects<T>(_ key: String, _ body: (inout JSONObjectReader) throws(CoreError) -> T) throws(CoreError) -> [T] {
        var out: [T] = []
        for (index, value) in try array(key).enumerated() {
            var reader = try JSONObjectReader(value, path: fieldPath("\(key)[\(index)]"), code: code)
            reader.unknownCode = unknownCode
            out.append(try body(&reader))
            try reader.finish()
        }
        return out
    }

    /// The object `key` read by `body`.
    mutating func object<T>(_ key: String, _ body: (inout JSONObjectReader) throws(CoreError) -> T) throws(CoreError) -> T {
        var reader = try JSONObjectReader(try required(key), path: fieldPath(key), code: code)
        reader.unknownCode = unknownCode
        let result = try body(&reader)
        try reader.finish()
        return result
    }

    /// Refuses any field that was not read, naming it when it looks like a field name.
    func finish() throws(CoreError) {
        let unknown = members.keys.filter { !read.contains($0) }.sorted(by: String.utf8Precedes)
        guard let first = unknown.first else { return }
        // Field names are schema, not document text; still, echo only identifier-like ones.
        let named = first.utf8.count <= 64 && first.utf8.allSatisfy {
            ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || $0 == UInt8(ascii: "_")
        }
        let which = named ? "unknown field `\(first)`" : "an unknown field"
        let more = unknown.count > 1 ? " (and \(unknown.count - 1) more)" : ""
        throw unknownRefusal("\(path.isEmpty ? "document" : "`\(path)`") has \(which)\(more); this build does not read it")
    }
}
