/// The signed root file `root/<n>.root.json` (protocol/root.md): `{"root": {...}, "signatures":
/// [...]}` in canonical JSON plus a newline, each signature Ed25519 over
/// `"cairn-root-v1\n" ‖ canonicalJSON(root)`.
public enum SignedRoot {
    /// The domain-separation prefix of the signed bytes.
    public static let domain = Array("cairn-root-v1\n".utf8)
    /// The most signatures a root file may carry (old and new root keys of a rotation).
    public static let maxSignatures = 32
    static let field = "root"

    /// The file's bytes: `root` signed by each of `keys`, in that order.
    public static func encode(_ root: RootMetadata, signingKeys keys: [PublisherKey]) -> [UInt8] {
        let content = root.canonicalJSON
        return SignedEnvelope(content: content, signatures: SignedEnvelope.sign(content, domain: domain, keys: keys)).encode(field: field)
    }

    /// Parses a root file without checking any signature: its envelope and its root.
    /// - Throws: `.rootMalformed`, or `.unsupportedFormat` for another format version.
    public static func decode(_ bytes: [UInt8]) throws(CoreError) -> (root: RootMetadata, envelope: SignedEnvelope) {
        let envelope = try SignedEnvelope.parse(bytes, field: field, maxSignatures: maxSignatures, code: .rootMalformed, what: "root")
        return (try root(of: envelope), envelope)
    }

    /// The root an envelope holds, parsed strictly.
    private static func root(of envelope: SignedEnvelope) throws(CoreError) -> RootMetadata {
        let root = try RootMetadata(json: envelope.content)
        guard root.canonicalJSON.bytes == envelope.content.bytes else {
            throw CoreError(.rootMalformed, "the root does not re-encode to the bytes that were signed")
        }
        return root
    }

    /// A root accepted on its own (a pinned file, or root 1): well formed and signed by at least
    /// `root_threshold` of its own root keys.
    /// - Throws: `decode`'s errors, or `.rootRefused` naming the count.
    public static func verifySelfSigned(_ bytes: [UInt8]) throws(CoreError) -> RootMetadata {
        let (root, envelope) = try decode(bytes)
        let own = envelope.validSigners(among: root.rootKeys, domain: domain).count
        guard own >= root.rootThreshold else {
            throw CoreError(.rootRefused, "root \(root.version) is signed by \(own) of its own root keys; its threshold is \(root.rootThreshold)")
        }
        return root
    }

    /// Root `trusted.version + 1`, accepted only when a threshold of `trusted`'s root keys and a
    /// threshold of its own root keys signed it. `trusted`'s keys are counted first, over the
    /// content as it is: a file they did not sign is refused as not chaining before its root is
    /// read, so only a root they signed can say "upgrade" (`.unsupportedFormat`).
    /// - Throws: the envelope's `.rootMalformed`, `.rootRefused` saying which rule failed, or the
    ///   root's own parse errors (`.rootMalformed`, `.unsupportedFormat`) once it chains.
    public static func verifyNext(_ bytes: [UInt8], after trusted: RootMetadata) throws(CoreError) -> RootMetadata {
        let envelope = try SignedEnvelope.parse(bytes, field: field, maxSignatures: maxSignatures, code: .rootMalformed, what: "root")
        let old = envelope.validSigners(among: trusted.rootKeys, domain: domain).count
        guard old >= trusted.rootThreshold else {
            throw CoreError(.rootRefused, "root/\(trusted.version + 1).root.json is signed by \(old) of root \(trusted.version)'s root keys; \(trusted.rootThreshold) are required (it does not chain)")
        }
        let root = try root(of: envelope)
        guard root.version == trusted.version + 1 else {
            let why = root.version <= trusted.version
                ? "older than or equal to the trusted root \(trusted.version) (rollback of trust)"
                : "not the next after the trusted root \(trusted.version)"
            throw CoreError(.rootRefused, "root/\(trusted.version + 1).root.json holds root \(root.version): \(why)")
        }
        let own = envelope.validSigners(among: root.rootKeys, domain: domain).count
        guard own >= root.rootThreshold else {
            throw CoreError(.rootRefused, "root \(root.version) is signed by \(own) of its own root keys; its threshold is \(root.rootThreshold)")
        }
        return root
    }
}

/// The roots a device has accepted, from the pinned one to the newest (protocol/root.md, "The
/// chain walk"); pure values, persisted by the caller.
public struct TrustChain: Sendable, Equatable {
    /// Ascending by version, each the successor of the one before it.
    public private(set) var roots: [RootMetadata]

    /// The chain holding only `pinned` (checked with `SignedRoot.verifySelfSigned`).
    public init(pinned: [UInt8]) throws(CoreError) {
        roots = [try SignedRoot.verifySelfSigned(pinned)]
    }

    /// The newest accepted root.
    public var current: RootMetadata { roots[roots.count - 1] }

    /// Every key that signs or signed manifests under this chain, revoked ones included, once
    /// each, in the order the roots name them: what an installed manifest's signature may be by.
    public var everySigningKey: [PublicKey] {
        var keys: [PublicKey] = []
        for key in roots.flatMap(\.signingKeys) where !keys.contains(key) { keys.append(key) }
        return keys
    }

    /// What manifests are checked against: the current root's signing keys and threshold, with
    /// the signing keys of earlier roots it dropped as revoked.
    public var policy: SigningPolicy { current.signingPolicy(earlier: Array(roots.dropLast())) }

    /// Accepts the next root (`SignedRoot.verifyNext`) and makes it current.
    @discardableResult
    public mutating func accept(next bytes: [UInt8]) throws(CoreError) -> RootMetadata {
        let root = try SignedRoot.verifyNext(bytes, after: current)
        roots.append(root)
        return root
    }
}
