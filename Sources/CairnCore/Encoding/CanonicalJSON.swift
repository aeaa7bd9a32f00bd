/// A JSON value with one canonical byte encoding (protocol/canonical-encoding.md): UTF-8, no
/// insignificant white space, object keys sorted by their UTF-8 bytes, integers only, strings
/// escaping only `"`, `\` and control characters below U+0020 (as `\u00xx`).
public indirect enum CanonicalJSON: Hashable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case string(String)
    case array([CanonicalJSON])
    case object([String: CanonicalJSON])

    /// The canonical bytes.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        write(to: &out)
        return out
    }

    public func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case .integer(let value): out.append(contentsOf: String(value).utf8)
        case .string(let value): Self.writeString(value, to: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                value.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            let keys = members.keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
            for (index, key) in keys.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                members[key]!.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func writeString(_ value: String, to out: inout [UInt8]) {
        writeString(utf8: value.utf8, to: &out)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// A string given as its UTF-8 bytes (a `String`'s, or text read from a file unchanged).
    static func writeString<S: Collection<UInt8>>(utf8 value: S, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most text needs no escape: copied in one piece.
        guard value.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
            out.append(contentsOf: value)
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in value {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                out.append(UInt8(ascii: "\\"))
                out.append(byte)
            case 0..<0x20:
                out.append(contentsOf: "\\u00".utf8)
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0xF)])
            default:
                out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
