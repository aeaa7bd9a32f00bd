import Foundation

/// Standard base64 (RFC 4648 §4, with padding), accepted only in its one canonical spelling.
enum Base64 {
    static func encode(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }

    /// The decoded bytes, or nil unless `text` is exactly what `encode` would write for them.
    static func decode(_ text: String) -> [UInt8]? {
        guard let data = Data(base64Encoded: text) else { return nil }
        let bytes = Array(data)
        return encode(bytes) == text ? bytes : nil
    }
}
