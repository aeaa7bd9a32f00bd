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
        self.rawBytes = rawBytes
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
