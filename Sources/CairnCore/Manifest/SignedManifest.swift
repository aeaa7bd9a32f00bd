/// The signed manifest file: `{"manifest": {...}, "signatures": [{"key_id", "algorithm",
/// "signature"}]}` in canonical JSON plus a trailing newline (protocol/manifest.md).
///
/// Each signature is Ed25519 over `"cairn-manifest-v1\n" + canonicalJSON(manifest)`.
public enum SignedManifest {
    /// The domain-separation prefix of the signed bytes.
    public static let domain = Array("cairn-manifest-v1\n".utf8)
    /// The only signature algorithm of format 1.
    public static let algorithm = "ed25519"
    /// The most signatures a file may carry, which bounds the work a hostile file can cause.
    public static let maxSignatures = 16

    /// The bytes every signature covers: `domain` followed by the manifest's canonical JSON.
    public static func signedBytes(_ manifest: CanonicalJSON) -> [UInt8] { domain + manifest.bytes }

    /// The file's bytes: `manifest` signed by each of `signingKeys`, in that order.
    public static func encode(_ manifest: Manifest, signingKeys: [PublisherKey]) -> [UInt8] {
        let message = signedBytes(manifest.canonicalJSON)
        let signatures = signingKeys.map { key in
            CanonicalJSON.object([
                "key_id": .string(key.keyID.hex),
                "algorithm": .string(algorithm),
                "signature": .string(Base64.encode(key.sign(message))),
            ])
        }
        let file = CanonicalJSON.object(["manifest": manifest.canonicalJSON, "signatures": .array(signatures)])
        return file.bytes + [UInt8(ascii: "\n")]
    }

    /// The file's bytes: `manifest` signed by `signingKey`.
    public static func encode(_ manifest: Manifest, signingKey: PublisherKey) -> [UInt8] {
        encode(manifest, signingKeys: [signingKey])
    }

    /// Parses a signed manifest file, verifies it and returns the manifest.
    ///
    /// Signatures are checked over the *re-canonicalised* manifest, so bytes that are not
    /// canonical still verify only if they mean exactly what was signed. Accepted when at least
    /// one signature whose `key_id` names a trusted key verifies.
    /// - Throws: `CoreError` with `.manifestMalformed` (not JSON, bad envelope),
    ///   `.untrustedKey` (no signature by a trusted key), `.signatureInvalid` (a trusted key's
    ///   signature does not verify), or whatever `Manifest(json:)` throws.
    public static func decodeAndVerify(_ bytes: [UInt8], trustedKeys: [PublicKey]) throws(CoreError) -> Manifest {
        let file: CanonicalJSON
        do {
            file = try CanonicalJSON.parse(bytes)
        } catch {
            throw CoreError(.manifestMalformed, "the manifest file is not acceptable JSON", cause: error)
        }
        var envelope = try JSONObjectReader(file, path: "", code: .manifestMalformed)
        let manifestJSON = try envelope.required("manifest")
        let signatures = try envelope.objects("signatures") { (s: inout JSONObjectReader) throws(CoreError) in
            guard let keyID = KeyID(hex: try s.string("key_id")) else {
                throw s.failure("key_id", "must be 16 lowercase hexadecimal digits")
            }
            _ = try s.string("algorithm", oneOf: [algorithm])
            guard let signature = Base64.decode(try s.string("signature")), signature.count == 64 else {
                throw s.failure("signature", "must be canonical base64 of 64 bytes")
            }
            return (keyID, signature)
        }
        try envelope.finish()
        guard signatures.count <= maxSignatures else {
            throw CoreError(.manifestMalformed, "the manifest carries \(signatures.count) signatures; at most \(maxSignatures) are allowed")
        }

        let message = signedBytes(manifestJSON)
        var trustedSignatureSeen = false
        for (keyID, signature) in signatures {
            for key in trustedKeys where key.keyID == keyID {
                trustedSignatureSeen = true
                if key.isValidSignature(signature, for: message) { return try parseSigned(manifestJSON, message) }
            }
        }
        if trustedSignatureSeen {
            throw CoreError(.signatureInvalid, "the manifest's signature by a trusted key does not verify; the file was altered or corrupted; try another source")
        }
        throw CoreError(.untrustedKey, signatures.isEmpty
            ? "the manifest carries no signature"
            : "the manifest is signed by none of the \(trustedKeys.count) trusted key(s); check the configured publisher keys")
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
