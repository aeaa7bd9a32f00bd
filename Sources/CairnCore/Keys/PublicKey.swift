import Crypto

/// A publisher's Ed25519 public key, as a device pins it (protocol/keys.md).
public struct PublicKey: Hashable, Sendable, CustomStringConvertible {
    /// The first word of a public key file.
    public static let fileTag = "cairn-ed25519-public-v1"

    /// The raw 32-byte key.
    public let rawBytes: [UInt8]

    /// A key from its raw 32 bytes.
    /// - Throws: `CoreError.Code.keyMalformed` if `rawBytes` is not 32 bytes.
    public init(rawBytes: [UInt8]) throws(CoreError) {
        guard rawBytes.count == 32, (try? Curve25519.Signing.PublicKey(rawRepresentation: rawBytes)) != nil else {
            throw CoreError(.keyMalformed, "an Ed25519 public key is 32 bytes, not \(rawBytes.count)")
        }
        guard !Self.isWeak(rawBytes) else {
            throw CoreError(.keyMalformed, "the Ed25519 public key is a point of small order or not canonically encoded: anyone can sign for it, or it is another key's second spelling")
        }
        self.rawBytes = rawBytes
    }

    /// The y coordinates (little-endian, sign bit clear) of the points of order 1, 2, 4 and 8
    /// on Ed25519: 0, 1, p − 1 and the two of order 8.
    static let smallOrderYs: [[UInt8]] = [
        [UInt8](repeating: 0, count: 32),
        [1] + [UInt8](repeating: 0, count: 31),
        [0xEC] + [UInt8](repeating: 0xFF, count: 30) + [0x7F],
        [0x26, 0xE8, 0x95, 0x8F, 0xC2, 0xB2, 0x27, 0xB0, 0x45, 0xC3, 0xF4, 0x89, 0xF2, 0xEF, 0x98, 0xF0,
         0xD5, 0xDF, 0xAC, 0x05, 0xD3, 0xC6, 0x33, 0x39, 0xB1, 0x38, 0x02, 0x88, 0x6D, 0x53, 0xFC, 0x05],
        [0xC7, 0x17, 0x6A, 0x70, 0x3D, 0x4D, 0xD8, 0x4F, 0xBA, 0x3C, 0x0B, 0x76, 0x0D, 0x10, 0x67, 0x0F,
         0x2A, 0x20, 0x53, 0xFA, 0x2C, 0x39, 0xCC, 0xC6, 0x4E, 0xC7, 0xFD, 0x77, 0x92, 0xAC, 0x03, 0x7A],
    ]

    /// Whether an encoded key is one BoringSSL's Ed25519 accepts but no one should: a point of
    /// small order (for the identity, `[S]B ‖ S` with any S verifies for every message), or a y
    /// of p or more (a second spelling of a key with y − p, under another key id).
    static func isWeak(_ raw: [UInt8]) -> Bool {
        var y = raw
        y[31] &= 0x7F
        let nonCanonical = y[31] == 0x7F && y[1..<31].allSatisfy { $0 == 0xFF } && y[0] >= 0xED
        return nonCanonical || smallOrderYs.contains(y)
    }

    /// Parses the text of a public key file: `cairn-ed25519-public-v1 <base64 of 32 bytes>\n`.
    /// - Throws: `CoreError.Code.keyMalformed`, saying which part is wrong.
    public init(fileText: String) throws(CoreError) {
        let bytes = try KeyFile.decode(fileText, tag: Self.fileTag, otherTag: PublisherKey.fileTag, kind: "public")
        try self.init(rawBytes: bytes)
    }

    /// The text of a public key file, ending in a newline.
    public var fileText: String { "\(Self.fileTag) \(Base64.encode(rawBytes))\n" }

    /// The key's id: the first 8 bytes of SHA-256 of `rawBytes`.
    public var keyID: KeyID { KeyID(publicKeyBytes: rawBytes) }

    /// Whether `signature` is this key's Ed25519 signature of `message`.
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        guard signature.count == 64, let key = try? Curve25519.Signing.PublicKey(rawRepresentation: rawBytes) else {
            return false
        }
        return key.isValidSignature(signature, for: message)
    }

    public var description: String { "PublicKey(\(keyID))" }
}

/// The shared shape of key files: one line, `<tag> <base64>`, then a newline.
enum KeyFile {
    static func decode(_ text: String, tag: String, otherTag: String, kind: String) throws(CoreError) -> [UInt8] {
        var line = Substring(text)
        if line.hasSuffix("\r\n") { line = line.dropLast(2) } else if line.hasSuffix("\n") { line = line.dropLast() }
        let parts = line.split(separator: " ", omittingEmptySubsequences: false)
        if parts.first.map(String.init) == otherTag {
            throw CoreError(.keyMalformed, "this is a \(kind == "public" ? "private" : "public") key file; a \(kind) key file was expected")
        }
        guard parts.count == 2, parts[0] == tag else {
            throw CoreError(.keyMalformed, "a \(kind) key file must be one line: \"\(tag) <base64>\"")
        }
        guard let bytes = Base64.decode(String(parts[1])) else {
            throw CoreError(.keyMalformed, "the \(kind) key file's key is not canonical base64")
        }
        guard bytes.count == 32 else {
            throw CoreError(.keyMalformed, "the \(kind) key file holds \(bytes.count) bytes; an Ed25519 key is 32")
        }
        return bytes
    }
}
