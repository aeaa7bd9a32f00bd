import CairnCore

extension FuzzTarget {
    /// The public key of protocol/vectors (a test key): the seed manifest is signed by it, so
    /// mutations of it exercise every step of verification.
    static let vectorKey = try! PublicKey(fileText: "cairn-ed25519-public-v1 ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ=\n")

    /// The manifest file: canonical JSON parsing, the manifest's strict schema and the signature
    /// check. Properties: a parsed value's canonical bytes parse back to the same bytes, and a
    /// manifest that parses re-encodes to a manifest equal to it.
    static let manifest = FuzzTarget(name: "manifest") { input in
        let bytes = Array(input)
        _ = try? SignedManifest.decodeAndVerify(bytes, trustedKeys: [vectorKey])
        guard let value = try? CanonicalJSON.parse(bytes) else { return }
        let canonical = value.bytes
        require((try? CanonicalJSON.parse(canonical))?.bytes == canonical, "canonical JSON does not parse back to itself")
        // The manifest without its envelope, and a bare manifest: the schema behind the signature.
        var candidates = [value]
        if case .object(let members) = value, let inner = members["manifest"] { candidates.append(inner) }
        for candidate in candidates {
            guard let manifest = try? Manifest(json: candidate) else { continue }
            require((try? Manifest(json: manifest.canonicalJSON)) == manifest, "a parsed manifest does not survive re-encoding")
        }
    }
}
