import Crypto

/// A publisher's Ed25519 signing key (protocol/keys.md). Keep it secret: its file is mode 0600.
public struct PublisherKey: Sendable, CustomStringConvertible {
    /// The first word of a private key file.
    public static let fileTag = "cairn-ed25519-private-v1"

    /// The 32-byte RFC 8032 seed; the Crypto key is rebuilt from it on use, which keeps this
    /// type plainly `Sendable`.
    public let seed: [UInt8]

    /// A new random key.
    public static func generate() -> PublisherKey {
        PublisherKey(validSeed: Array(Curve25519.Signing.PrivateKey().rawRepresentation))
    }

    private init(validSeed: [UInt8]) { seed = validSeed }

    private var key: Curve25519.Signing.PrivateKey {
        // The initialisers only store seeds that Crypto accepted.
        try! Curve25519.Signing.PrivateKey(rawRepresentation: seed)
    }

    /// The key whose 32-byte RFC 8032 seed is `seed`.
    /// - Throws: `CoreError.Code.keyMalformed` if `seed` is not 32 bytes.
    public init(seed: [UInt8]) throws(CoreError) {
        guard seed.count == 32, (try? Curve25519.Signing.PrivateKey(rawRepresentation: seed)) != nil else {
            throw CoreError(.keyMalformed, "an Ed25519 private key seed is 32 bytes, not \(seed.count)")
        }
        self.seed = seed
    }

    /// Parses the text of a private key file: `cairn-ed25519-private-v1 <base64 seed>\n`.
    /// - Throws: `CoreError.Code.keyMalformed`, saying which part is wrong (never the key).
    public init(fileText: String) throws(CoreError) {
        try self.init(seed: try KeyFile.decode(fileText, tag: Self.fileTag, otherTag: PublicKey.fileTag, kind: "private"))
    }

    /// The text of a private key file, ending in a newline.
    public var fileText: String { "\(Self.fileTag) \(Base64.encode(seed))\n" }

    /// Names the key by its id only, so logging a key never leaks it.
    public var description: String { "PublisherKey(\(keyID))" }

    /// The matching public key.
    public var publicKey: PublicKey { try! PublicKey(rawBytes: Array(key.publicKey.rawRepresentation)) }

    /// The key's id (that of its public key).
    public var keyID: KeyID { publicKey.keyID }

    /// The 64-byte Ed25519 signature of `message`. Deterministic (RFC 8032) with the BoringSSL
    /// backend used on Linux; Apple's CryptoKit adds randomness, which verifiers accept alike.
    public func sign(_ message: [UInt8]) -> [UInt8] {
        // Signing only fails for malformed keys, which the initialisers rule out.
        Array(try! key.signature(for: message))
    }
}
