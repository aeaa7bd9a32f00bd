/// The signed manifest file: `{"manifest": {...}, "signatures": [{"key_id", "algorithm",
/// "signature"}]}` in canonical JSON plus a trailing newline (protocol/manifest.md).
///
/// Each signature is Ed25519 over `"cairn-manifest-v1\n" + canonicalJSON(manifest)`.
public enum SignedManifest {
    /// The domain-separation prefix of the signed bytes.
    public static let domain = Array("cairn-manifest-v1\n".utf8)
    /// The only signature algorithm of format 1.
    public static let algorithm = SignedEnvelope.algorithm
    /// The envelope's field that holds the manifest.
    static let field = "manifest"
    /// The most signatures a file may carry, which bounds the work a hostile file can cause.
    public static let maxSignatures = 16

    /// The bytes every signature covers: `domain` followed by the manifest's canonical JSON.
    public static func signedBytes(_ manifest: CanonicalJSON) -> [UInt8] { SignedEnvelope.signedBytes(domain: domain, manifest) }

    /// The file's bytes: `manifest` signed by each of `signingKeys`, in that order.
    public static func encode(_ manifest: Manifest, signingKeys: [PublisherKey]) -> [UInt8] {
        envelope(manifest, signingKeys: signingKeys).encode(field: field)
    }

    /// The file's bytes: `manifest` signed by `signingKey`.
    public static func encode(_ manifest: Manifest, signingKey: PublisherKey) -> [UInt8] {
        encode(manifest, signingKeys: [signingKey])
    }

    /// `manifest` with the signatures of `signingKeys` (none: a version staged for signing).
    public static func envelope(_ manifest: Manifest, signingKeys: [PublisherKey]) -> SignedEnvelope {
        let content = manifest.canonicalJSON
        return SignedEnvelope(content: content, signatures: SignedEnvelope.sign(content, domain: domain, keys: signingKeys))
    }

    /// The envelope of a signed manifest file, not verified (for collecting signatures).
    /// - Throws: `.manifestMalformed` for bytes that are not a signed manifest file's shape.
    public static func decodeEnvelope(_ bytes: [UInt8]) throws(CoreError) -> SignedEnvelope {
        try SignedEnvelope.parse(bytes, field: field, maxSignatures: maxSignatures, code: .manifestMalformed, what: "manifest")
    }

    /// Parses a signed manifest file, verifies it against pinned keys (threshold 1) and returns
    /// the manifest; see `decodeAndVerify(_:policy:)`.
    public static func decodeAndVerify(_ bytes: [UInt8], trustedKeys: [PublicKey]) throws(CoreError) -> Manifest {
        try decodeAndVerify(bytes, policy: SigningPolicy(keys: trustedKeys))
    }

    /// Parses a signed manifest file, verifies it and returns the manifest.
    ///
    /// Signatures are checked over the *re-canonicalised* manifest, so bytes that are not
    /// canonical still verify only if they mean exactly what was signed. Accepted when at least
    /// `policy.threshold` distinct keys of `policy.keys` made signatures that verify.
    /// - Throws: `CoreError` with `.manifestMalformed` (not JSON, bad envelope), or the policy's
    ///   refusal (`.thresholdNotMet`, `.keyRevoked`, `.signatureInvalid`, `.untrustedKey`), or
    ///   whatever `Manifest(json:)` throws.
    public static func decodeAndVerify(_ bytes: [UInt8], policy: SigningPolicy) throws(CoreError) -> Manifest {
        let envelope = try decodeEnvelope(bytes)
        try policy.check(envelope, domain: domain, what: "manifest")
        return try parseSigned(envelope.content, signedBytes(envelope.content))
    }

    private static func parseSigned(_ json: CanonicalJSON, _ message: [UInt8]) throws(CoreError) -> Manifest {
        let manifest = try Manifest(json: json)
        // Strict parsing should make this impossible; it guarantees the value handed out is
        // exactly the one that was signed.
        guard domain + manifest.canonicalJSON.bytes == message else {
            throw CoreError(.manifestMalformed, "the manifest does not re-encode to the bytes that were signed")
        }
        return manifest
    }
}
