extension CanonicalJSON {
    /// The largest input `parse` accepts: 1 MiB.
    public static let maxInputBytes = 1 << 20
    /// The deepest nesting of arrays and objects `parse` accepts.
    public static let maxDepth = 64

    /// Parses strict JSON (RFC 8259) into a value, refusing what Cairn never writes: numbers
    /// with a fraction or exponent, integers outside Int64, duplicate object keys, invalid
    /// UTF-8 (raw or as lone `\u` surrogates), nesting deeper than `maxDepth`, and inputs
    /// longer than `maxInputBytes`. White space between tokens is allowed; `bytes` need not be
    /// canonical. Never traps, whatever the input.
    ///
    /// Keys are Swift strings, so two keys equal under Unicode canonical equivalence count as
    /// duplicates.
    /// - Throws: `CoreError` with code `.jsonMalformed`, naming the byte offset.
    public static func parse(_ bytes: [UInt8]) throws(CoreError) -> CanonicalJSON {
        guard bytes.count <= maxInputBytes else {
            throw CoreError(.jsonMalformed, "JSON input is \(bytes.count) bytes; the limit is \(maxInputBytes)")
        }
        var parser = JSONParser(bytes: bytes)
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.failure("unexpected bytes after the JSON value") }
        return value
    }
}

/// A recursive-descent parser; recursion is bounded by `CanonicalJSON.maxDepth`.
struct JSONParser {
    let bytes: [UInt8]
    var index = 0
    /// Numbers of every form are skipped rather than refused (`CanonicalJSON.repeatsAKey`).
    let anyNumbers: Bool
    /// Values are checked and dropped, not kept (`CanonicalJSON.checkKeys`): only the keys of
    /// the objects being read are held, so a large document costs no tree beside its bytes.
    let keepValues: Bool
    /// Set when parsing stopped at a key that its object already had.
    private(set) var repeatedKey = false

    init(bytes: [UInt8], anyNumbers: Bool = false, keepValues: Bool = true) {
        self.bytes = bytes
        self.anyNumbers = anyNumbers
        self.keepValues = keepValues
    }

    func failure(_ what: String) -> CoreError {
        CoreError(.jsonMalformed, "JSON: \(what) at byte offset \(index)")
    }

    var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipWhitespace() {
        while let byte = peek, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    mutating func value(depth: Int) throws(CoreError) -> CanonicalJSON {
        guard let byte = peek else { throw failure("unexpected end of input") }
        switch byte {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            if anyNumbers { try skipNumber(); return .null }
            return .integer(try integer())
        default: throw failure("unexpected byte 0x\(String(byte, radix: 16))")
        }
    }

    mutating func literal(_ word: String) throws(CoreError) {
        let expected = Array(word.utf8)
        guard bytes.count - index >= expected.count, bytes[index..<index + expected.count].elementsEqual(expected) else {
            throw failure("invalid literal")
        }
        index += expected.count
    }

    mutating func object(depth: Int) throws(CoreError) -> CanonicalJSON {
        guard depth <= CanonicalJSON.maxDepth else { throw failure("nesting deeper than \(CanonicalJSON.maxDepth)") }
        index += 1
        var members: [String: CanonicalJSON] = [:]
        var keys: Set<String> = []
        skipWhitespace()
        if peek == UInt8(ascii: "}") { index += 1; return .object(members) }
        while true {
            skipWhitespace()
            guard peek == UInt8(ascii: "\"") else { throw failure("expected a string key") }
            let keyOffset = index
            let key = try string()
            skipWhitespace()
            guard peek == UInt8(ascii: ":") else { throw failure("expected ':'") }
            index += 1
            skipWhitespace()
            let member = try value(depth: depth)
            let repeated = keepValues ? members.updateValue(member, forKey: key) != nil : !keys.insert(key).inserted
            guard !repeated else {
                index = keyOffset
                repeatedKey = true
                throw failure("duplicate object key")
            }
            skipWhitespace()
            switch peek {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"): index += 1; return .object(members)
            default: throw failure("expected ',' or '}'")
            }
        }
    }

    mutating func array(depth: Int) throws(CoreError) -> CanonicalJSON {
        guard depth <= CanonicalJSON.maxDepth else { throw failure("nesting deeper than \(CanonicalJSON.maxDepth)") }
        index += 1
        var elements: [CanonicalJSON] = []
        skipWhitespace()
        if peek == UInt8(ascii: "]") { index += 1; return .array(elements) }
        while true {
            skipWhitespace()
            let element = try value(depth: depth)
            if keepValues { elements.append(element) }
            skipWhitespace()
            switch peek {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"): index += 1; return .array(elements)
            default: throw failure("expected ',' or ']'")
            }
        }
    }
}
