/// One version of a repository's root of trust (protocol/root.md): the keys that may sign the
/// next root and how many must, the keys that may sign manifests and how many must, and an
/// expiry. Signed as a whole; see `SignedRoot`.
public struct RootMetadata: Sendable, Equatable {
    /// The root format this build reads and writes.
    public static let currentFormatVersion = 1
    /// The most keys a list may hold.
    public static let maxKeys = 16

    public var formatVersion: Int
    public var version: Int
    public var created: Timestamp
    public var expires: Timestamp
    /// Keys that sign rotations (the next root); sorted by key id, distinct.
    public var rootKeys: [PublicKey]
    public var rootThreshold: Int
    /// Keys that sign manifests; sorted by key id, distinct.
    public var signingKeys: [PublicKey]
    public var signingThreshold: Int

    /// A root; the key lists are sorted by key id and duplicates dropped, as the format requires.
    /// - Throws: `.rootMalformed` when a list is empty or too long, a threshold is out of
    ///   1 … its list's length, or `expires` is not later than `created`.
    public init(formatVersion: Int = RootMetadata.currentFormatVersion, version: Int, created: Timestamp, expires: Timestamp,
                rootKeys: [PublicKey], rootThreshold: Int, signingKeys: [PublicKey], signingThreshold: Int) throws(CoreError) {
        self.formatVersion = formatVersion
        self.version = version
        self.created = created
        self.expires = expires
        self.rootKeys = Self.normalized(rootKeys)
        self.rootThreshold = rootThreshold
        self.signingKeys = Self.normalized(signingKeys)
        self.signingThreshold = signingThreshold
        try validate()
    }

    static func normalized(_ keys: [PublicKey]) -> [PublicKey] {
        var seen: Set<KeyID> = []
        return keys.filter { seen.insert($0.keyID).inserted }.sorted { $0.keyID.hex < $1.keyID.hex }
    }

    private func validate() throws(CoreError) {
        guard (1...JSONObjectReader.maxInteger).contains(version) else {
            throw CoreError(.rootMalformed, "field `version` must be in 1...\(JSONObjectReader.maxInteger)")
        }
        guard expires > created else { throw CoreError(.rootMalformed, "field `expires` must be later than `created`") }
        for (name, keys, threshold, thresholdName) in [("root_keys", rootKeys, rootThreshold, "root_threshold"),
                                                        ("signing_keys", signingKeys, signingThreshold, "signing_threshold")] {
            guard (1...Self.maxKeys).contains(keys.count) else {
                throw CoreError(.rootMalformed, "field `\(name)` must hold 1...\(Self.maxKeys) keys, not \(keys.count)")
            }
            guard (1...keys.count).contains(threshold) else {
                throw CoreError(.rootMalformed, "field `\(thresholdName)` must be in 1...\(keys.count) (the number of \(name)), not \(threshold)")
            }
        }
    }

    /// The policy manifests are checked against while this root is the trusted one; `earlier`
    /// are the roots accepted before it, whose dropped signing keys count as revoked.
    public func signingPolicy(earlier: [RootMetadata] = []) -> SigningPolicy {
        SigningPolicy(keys: signingKeys, threshold: signingThreshold, revoked: earlier.flatMap(\.signingKeys))
    }

    /// Whether the root has expired at `now` (true once `now` is at or after `expires`).
    public func isExpired(at now: Timestamp) -> Bool { now >= expires }

    /// The root as canonical JSON: the exact value that is signed.
    public var canonicalJSON: CanonicalJSON {
        func keys(_ list: [PublicKey]) -> CanonicalJSON {
            .array(list.map { .object(["key_id": .string($0.keyID.hex), "public_key": .string(Base64.encode($0.rawBytes))]) })
        }
        return .object([
            "format_version": .integer(Int64(formatVersion)),
            "version": .integer(Int64(version)),
            "created": .string(created.rfc3339),
            "expires": .string(expires.rfc3339),
            "root_keys": keys(rootKeys),
            "root_threshold": .integer(Int64(rootThreshold)),
            "signing_keys": keys(signingKeys),
            "signing_threshold": .integer(Int64(signingThreshold)),
        ])
    }

    /// Parses a root strictly: `format_version` first (anything but 1 is `.unsupportedFormat`),
    /// then every field, refusing missing, ill-typed, out-of-range and unknown fields, key lists
    /// that are unsorted, repeated or whose `key_id` is not their key's, with `.rootMalformed`.
    public init(json: CanonicalJSON) throws(CoreError) {
        var r = try JSONObjectReader(json, path: "", code: .rootMalformed)
        guard case .integer(let format)? = r.optional("format_version") else {
            throw r.failure("format_version", r.members["format_version"] == nil ? "is missing" : "must be an integer")
        }
        guard format == Int64(Self.currentFormatVersion) else {
            throw CoreError(.unsupportedFormat, "root format_version \(format) is not supported; this build reads \(Self.currentFormatVersion); upgrade the software")
        }
        let version = try r.integer("version", in: 1...JSONObjectReader.maxInteger)
        let created = try r.timestamp("created")
        let expires = try r.timestamp("expires")
        let rootKeys = try Self.keys(&r, "root_keys")
        let rootThreshold = try r.integer("root_threshold", in: 1...Self.maxKeys)
        let signingKeys = try Self.keys(&r, "signing_keys")
        let signingThreshold = try r.integer("signing_threshold", in: 1...Self.maxKeys)
        try r.finish()
        try self.init(version: version, created: created, expires: expires, rootKeys: rootKeys, rootThreshold: rootThreshold,
                      signingKeys: signingKeys, signingThreshold: signingThreshold)
    }

    private static func keys(_ r: inout JSONObjectReader, _ field: String) throws(CoreError) -> [PublicKey] {
        guard r.members[field].map({ if case .array(let a) = $0 { a.count <= maxKeys } else { true } }) ?? true else {
            throw r.failure(field, "must hold at most \(maxKeys) keys")
        }
        let keys = try r.objects(field) { (k: inout JSONObjectReader) throws(CoreError) -> PublicKey in
            guard let id = KeyID(hex: try k.string("key_id")) else {
                throw k.failure("key_id", "must be 16 lowercase hexadecimal digits")
            }
            guard let raw = Base64.decode(try k.string("public_key")), let key = try? PublicKey(rawBytes: raw) else {
                throw k.failure("public_key", "must be canonical base64 of a 32-byte Ed25519 public key")
            }
            guard key.keyID == id else { throw k.failure("key_id", "is not the id of `public_key`") }
            return key
        }
        guard keys == normalized(keys) else {
            throw r.failure(field, "must be sorted by key_id without repeats")
        }
        return keys
    }
}
