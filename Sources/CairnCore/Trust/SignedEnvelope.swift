/// The shape every signed Cairn document shares (protocol/manifest.md, protocol/root.md):
/// `{"<content field>": {...}, "signatures": [{"algorithm", "key_id", "signature"}]}` in
/// canonical JSON plus a newline, each signature Ed25519 over `domain ‖ canonicalJSON(content)`.
public struct SignedEnvelope: Sendable {
    /// One signature entry: the key id it names and its 64 bytes.
    public struct Signature: Sendable, Equatable {
        public let keyID: KeyID
        public let bytes: [UInt8]

        public init(keyID: KeyID, bytes: [UInt8]) {
            self.keyID = keyID
            self.bytes = bytes
        }
    }

    /// The only signature algorithm of format 1.
    public static let algorithm = "ed25519"

    /// The signed value, exactly as parsed (re-canonicalised when its bytes are needed).
    public let content: CanonicalJSON
    /// The Ed25519 signatures: the only ones this build verifies and counts.
    public let signatures: [Signature]
    /// Entries of another `algorithm` (a newer publisher signing with a second algorithm while
    /// its fleet moves over), kept as they came: never verified, never counted, written back by
    /// `encode` (protocol/manifest.md, "The signed manifest file").
    public let foreign: [CanonicalJSON]

    public init(content: CanonicalJSON, signatures: [Signature], foreign: [CanonicalJSON] = []) {
        self.content = content
        self.signatures = signatures
        self.foreign = foreign
    }

    /// The algorithms of `foreign`, sorted, once each.
    public var foreignAlgorithms: [String] {
        Set(foreign.compactMap { entry -> String? in
            guard case .object(let members) = entry, case .string(let name)? = members["algorithm"] else { return nil }
            return name
        }).sorted()
    }

    /// The bytes every signature covers: `domain` followed by the content's canonical JSON.
    public static func signedBytes(domain: [UInt8], _ content: CanonicalJSON) -> [UInt8] { domain + content.bytes }

    /// Signatures of `content` by each of `keys`, in that order.
    public static func sign(_ content: CanonicalJSON, domain: [UInt8], keys: [PublisherKey]) -> [Signature] {
        let message = signedBytes(domain: domain, content)
        return keys.map { Signature(keyID: $0.keyID, bytes: $0.sign(message)) }
    }

    /// The file's bytes: canonical JSON of the envelope with the content under `field`, then `\n`.
    public func encode(field: String) -> [UInt8] {
        let entries = signatures.map { signature in
            CanonicalJSON.object([
                "key_id": .string(signature.keyID.hex),
                "algorithm": .string(Self.algorithm),
                "signature": .string(Base64.encode(signature.bytes)),
            ])
        }
        return CanonicalJSON.object([field: content, "signatures": .array(entries + foreign)]).bytes + [UInt8(ascii: "\n")]
    }

    /// This envelope with `added` appended, skipping signatures it holds already. A key's
    /// second signature with other bytes is kept too (Ed25519 signs one content one way, so one
    /// of the two is damaged, and which cannot be told without the key): `validSigners` counts the
    /// key once if either verifies, and `verified(among:domain:)` keeps only that one.
    public func adding(_ added: [Signature]) -> SignedEnvelope {
        var all = signatures
        for signature in added where !all.contains(signature) { all.append(signature) }
        return SignedEnvelope(content: content, signatures: all, foreign: foreign)
    }

    /// This envelope with only signatures by `keys` that verify, one per key.
    public func verified(among keys: [PublicKey], domain: [UInt8]) -> SignedEnvelope {
        let message = Self.signedBytes(domain: domain, content)
        var kept: [Signature] = []
        for signature in signatures where !kept.contains(where: { $0.keyID == signature.keyID }) {
            if let key = keys.first(where: { $0.keyID == signature.keyID }), key.isValidSignature(signature.bytes, for: message) {
                kept.append(signature)
            }
        }
        return SignedEnvelope(content: content, signatures: kept)
    }

    /// Parses the envelope strictly (not the content: its own parser does that). An entry of
    /// another algorithm (`[a-z0-9][a-z0-9-]{0,31}`, with a `key_id` and a `signature` string,
    /// each at most 16 KiB) goes to `foreign`, unread.
    /// - Throws: `code` for bytes that are not JSON, a wrong envelope or signature entry, or
    ///   more than `maxSignatures` entries of any algorithm.
    public static func parse(_ bytes: [UInt8], field: String, maxSignatures: Int, code: CoreError.Code,
                             what: String) throws(CoreError) -> SignedEnvelope {
        let file: CanonicalJSON
        do {
            file = try CanonicalJSON.parse(bytes)
        } catch {
            throw CoreError(code, "the \(what) file is not acceptable JSON", cause: error)
        }
        var envelope = try JSONObjectReader(file, path: "", code: code)
        let content = try envelope.required(field)
        var foreign: [CanonicalJSON] = []
        let entries = try envelope.objects("signatures") { (s: inout JSONObjectReader) throws(CoreError) -> Signature? in
            let name = try s.string("algorithm")
            guard Array(name.utf8) == Array(algorithm.utf8) else {
                guard Self.isAlgorithmName(name) else {
                    throw s.failure("algorithm", "must be \"\(algorithm)\", or another algorithm's name ([a-z0-9-], at most 32)")
                }
                for field in ["key_id", "signature"] where try s.string(field).utf8.count > 16_384 {
                    throw s.failure(field, "is longer than 16 KiB")
                }
                return nil
            }
            guard let keyID = KeyID(hex: try s.string("key_id")) else {
                throw s.failure("key_id", "must be 16 lowercase hexadecimal digits")
            }
            guard let signature = Base64.decode(try s.string("signature")), signature.count == 64 else {
                throw s.failure("signature", "must be canonical base64 of 64 bytes")
            }
            return Signature(keyID: keyID, bytes: signature)
        }
        try envelope.finish()
        guard entries.count <= maxSignatures else {
            throw CoreError(code, "the \(what) carries \(entries.count) signatures; at most \(maxSignatures) are allowed")
        }
        if case .array(let raw)? = envelope.members["signatures"] {
            foreign = zip(entries, raw).compactMap { $0 == nil ? $1 : nil }
        }
        return SignedEnvelope(content: content, signatures: entries.compactMap { $0 }, foreign: foreign)
    }

    /// A signature algorithm's name as an entry may carry one: `[a-z0-9][a-z0-9-]{0,31}`.
    static func isAlgorithmName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        func allowed(_ byte: UInt8) -> Bool { (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) }
        guard let first = bytes.first, allowed(first), bytes.count <= 32 else { return false }
        return bytes.allSatisfy { allowed($0) || $0 == UInt8(ascii: "-") }
    }

    /// The distinct keys among `keys` whose signature in this envelope verifies over
    /// `domain ‖ canonicalJSON(content)`; each key counts once, however often it signed.
    public func validSigners(among keys: [PublicKey], domain: [UInt8]) -> Set<KeyID> {
        let message = Self.signedBytes(domain: domain, content)
        var valid: Set<KeyID> = []
        for signature in signatures where !valid.contains(signature.keyID) {
            if let key = keys.first(where: { $0.keyID == signature.keyID }), key.isValidSignature(signature.bytes, for: message) {
                valid.insert(signature.keyID)
            }
        }
        return valid
    }
}
