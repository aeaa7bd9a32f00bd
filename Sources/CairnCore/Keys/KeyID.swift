import Crypto

/// Names a publisher key: the first 8 bytes of the SHA-256 of its raw 32-byte Ed25519 public
/// key, written as 16 lowercase hexadecimal digits (protocol/keys.md).
public struct KeyID: Hashable, Sendable, CustomStringConvertible {
    /// The 8 bytes.
    public let bytes: [UInt8]

    /// The id of the raw 32-byte public key `publicKeyBytes`.
    public init(publicKeyBytes: [UInt8]) {
        bytes = Array(SHA256.hash(data: publicKeyBytes).prefix(8))
    }

    /// Parses 16 lowercase hexadecimal digits.
    public init?(hex: String) {
        // Reuse ContentID's strict hex parser by padding to its 64 digits.
        let utf8 = Array(hex.utf8)
        guard utf8.count == 16, let id = ContentID(hex: hex + String(repeating: "0", count: 48)) else { return nil }
        bytes = Array(id.bytes.prefix(8))
    }

    /// 16 lowercase hexadecimal digits.
    public var hex: String { String(ContentID(bytes: bytes + [UInt8](repeating: 0, count: 24))!.hex.prefix(16)) }

    public var description: String { hex }
}
