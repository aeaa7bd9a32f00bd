/// Which keys may sign manifests and how many must (protocol/root.md, "Verifying a manifest
/// under a root"): a root's `signing_keys` and `signing_threshold`, or a device's pinned keys
/// with threshold 1. `revoked` are signing keys of earlier roots that the current one dropped,
/// known only so that a refusal can say `key_revoked`.
public struct SigningPolicy: Sendable, Equatable {
    public var keys: [PublicKey]
    public var threshold: Int
    public var revoked: [PublicKey]

    public init(keys: [PublicKey], threshold: Int = 1, revoked: [PublicKey] = []) {
        self.keys = keys
        self.threshold = max(1, threshold)
        self.revoked = revoked.filter { !keys.contains($0) }
    }

    /// Whether `envelope` meets the policy; otherwise the refusal, by the precedence of
    /// protocol/root.md: `threshold_not_met`, `key_revoked`, `signature_invalid`, `untrusted_key`.
    public func check(_ envelope: SignedEnvelope, domain: [UInt8], what: String) throws(CoreError) {
        let valid = envelope.validSigners(among: keys, domain: domain)
        if valid.count >= threshold { return }
        if !valid.isEmpty {
            throw CoreError(.thresholdNotMet, "the \(what) is signed by \(valid.count) of the \(threshold) signing keys it needs; collect more signatures (cairn-server sign) before releasing it")
        }
        if !envelope.validSigners(among: revoked, domain: domain).isEmpty {
            throw CoreError(.keyRevoked, "the \(what) is signed only by a key that a root rotation revoked; it no longer counts")
        }
        let ids = Set(keys.map(\.keyID))
        if envelope.signatures.contains(where: { ids.contains($0.keyID) }) {
            throw CoreError(.signatureInvalid, "the \(what)'s signature by a trusted key does not verify; the file was altered or corrupted; try another source")
        }
        if envelope.signatures.isEmpty, !envelope.foreign.isEmpty {
            throw CoreError(.untrustedKey, "the \(what) carries no \(SignedEnvelope.algorithm) signature, only \(envelope.foreignAlgorithms.joined(separator: ", ")), which this build does not verify; a newer publisher signs with it: upgrade, or have it sign with \(SignedEnvelope.algorithm) too")
        }
        throw CoreError(.untrustedKey, envelope.signatures.isEmpty
            ? "the \(what) carries no signature"
            : "the \(what) is signed by none of the \(keys.count) trusted key(s); check the configured publisher keys or trusted root")
    }
}
