/// Reads little-endian values from bytes that the caller keeps alive, checking every length
/// against what is left before touching or allocating anything; failures are `.deltaMalformed`.
struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    private(set) var offset: Int

    init(_ bytes: UnsafeRawBufferPointer, at offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    var remaining: Int { bytes.count - offset }

    func failure(_ what: String) -> CoreError {
        CoreError(.deltaMalformed, "delta: \(what) at byte offset \(offset)")
    }

    mutating func take(_ count: Int, _ what: String) throws(CoreError) -> UnsafeRawBufferPointer {
        guard count >= 0, count <= remaining else { throw failure("\(what) runs past the end") }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    mutating func u8(_ what: String) throws(CoreError) -> UInt8 { try take(1, what).first! }

    mutating func u32(_ what: String) throws(CoreError) -> UInt32 {
        try take(4, what).reversed().reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func u64(_ what: String) throws(CoreError) -> UInt64 {
        try take(8, what).reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// A u32 length, then that many bytes of valid UTF-8.
    mutating func string(_ what: String) throws(CoreError) -> String {
        let length = Int(try u32("\(what) length"))
        let start = offset
        guard let text = String(validating: try take(length, what), as: UTF8.self) else {
            offset = start
            throw failure("\(what) is not valid UTF-8")
        }
        return text
    }

    /// A flag byte (0 absent, 1 present), then the string if present.
    mutating func optionalString(_ what: String) throws(CoreError) -> String? {
        switch try u8("\(what) flag") {
        case 0: return nil
        case 1: return try string(what)
        default: throw failure("\(what) flag must be 0 or 1")
        }
    }
}

/// Appends little-endian values to a byte array.
struct ByteWriter {
    var bytes: [UInt8] = []

    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func u32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u64(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }

    mutating func string(_ value: String) {
        u32(UInt32(value.utf8.count))
        bytes.append(contentsOf: value.utf8)
    }

    mutating func optionalString(_ value: String?) {
        guard let value else { return u8(0) }
        u8(1)
        string(value)
    }
}
