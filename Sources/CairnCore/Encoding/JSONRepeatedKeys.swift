extension CanonicalJSON {
    /// Whether `bytes`, JSON with numbers of any form (a request body, an MCP message), names a
    /// key twice within one object. Decoders keep one of the two, the first or the last as they
    /// please, so a caller's `{"k": 3, "k": 50}` would be answered for one of them silently;
    /// callers refuse it instead. False when `bytes` is not JSON (the decoder says what is
    /// wrong), nests deeper than `maxDepth`, or is longer than `maxInputBytes`.
    public static func repeatsAKey(_ bytes: some Collection<UInt8>) -> Bool {
        checkKeys(bytes) == .repeated
    }

    /// What `checkKeys` found.
    public enum KeyCheck: Sendable, Equatable {
        /// JSON (numbers of any form) whose objects name each key once.
        case unique
        /// An object names a key twice.
        case repeated
        /// Not UTF-8 JSON this parser reads: a byte-order mark, UTF-16 or UTF-32, bytes that
        /// are not JSON, nesting deeper than `maxDepth`, more than `maxInputBytes`. Foundation's
        /// decoder takes the first three (transcoding them) and keeps one value of a repeated
        /// key, so a caller that checked only for `repeated` would let such a body past.
        case unreadable
    }

    /// Whether `bytes` is UTF-8 JSON whose objects name each key once. Longer than `maxBytes`
    /// (a request's limit by default; a publisher's own source files have none) is unreadable.
    public static func checkKeys(_ bytes: some Collection<UInt8>, maxBytes: Int = maxInputBytes) -> KeyCheck {
        guard bytes.count <= maxBytes else { return .unreadable }
        var parser = JSONParser(bytes: Array(bytes), anyNumbers: true, keepValues: false)
        parser.skipWhitespace()
        do { _ = try parser.value(depth: 0) } catch { return parser.repeatedKey ? .repeated : .unreadable }
        parser.skipWhitespace()
        return parser.index == parser.bytes.count ? .unique : .unreadable
    }
}

extension JSONParser {
    /// A number of any JSON form (fraction, exponent, any size), skipped (`anyNumbers`).
    mutating func skipNumber() throws(CoreError) {
        let start = index
        if peek == UInt8(ascii: "-") { index += 1 }
        while let byte = peek, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: ".")
                || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") {
            index += 1
        }
        guard index > start else { throw failure("expected a number") }
    }
}
