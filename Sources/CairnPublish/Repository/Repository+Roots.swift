public import CairnCore
import CairnStore
import Foundation

/// Which keys sign a repository's manifests (protocol/root.md): its root chain, and the keys
/// that signed before root 1 existed.
public struct RepositoryTrust: Sendable {
    /// The verified root chain, ascending from root 1; empty when the repository has no root.
    public let roots: [RootMetadata]
    /// Keys for manifests created before root 1 (or every manifest, without a root).
    public let keys: [PublicKey]

    public init(roots: [RootMetadata], keys: [PublicKey]) {
        self.roots = roots
        self.keys = keys
    }

    /// The newest root, if any.
    public var current: RootMetadata? { roots.last }

    /// The policy for a manifest created at `created`: that of the root in force then (the newest
    /// whose `created` is not later), with the signing keys earlier roots dropped as revoked; the
    /// keys (threshold 1) for a manifest older than every root.
    public func policy(forCreated created: Timestamp) -> (policy: SigningPolicy, root: Int?) {
        guard let index = roots.lastIndex(where: { $0.created <= created }) else { return (SigningPolicy(keys: keys), nil) }
        return (roots[index].signingPolicy(earlier: Array(roots[..<index])), roots[index].version)
    }
}

extension Repository {
    /// `root/`.
    public var rootFolder: String { root + "/root" }
    /// `root/<n>.root.json`.
    public func rootPath(_ version: Int) -> String { rootFolder + "/\(version).root.json" }

    /// The root versions with a file, ascending.
    public func rootVersions() -> [Int] {
        ((try? FileManager.default.contentsOfDirectory(atPath: rootFolder)) ?? []).compactMap { name in
            guard name.hasSuffix(".root.json"), let n = Int(name.dropLast(10)), n >= 1, "\(n).root.json" == name else { return nil }
            return n
        }.sorted()
    }

    /// The root chain from `root/1.root.json` (self-signed) through every step, or nil when the
    /// repository has no root.
    /// - Throws: `.repositoryCorrupt` naming the first file that is missing or does not chain.
    public func rootChain() throws(PublishError) -> TrustChain? {
        let versions = rootVersions()
        guard let newest = versions.last else { return nil }
        func refused(_ version: Int, _ error: CoreError) -> PublishError {
            PublishError(.repositoryCorrupt, "\(rootPath(version)): \(error.code): \(error.message)", cause: error)
        }
        let first = try rootBytes(1)
        var chain: TrustChain
        do { chain = try TrustChain(pinned: first) } catch { throw refused(1, error) }
        // Devices pinned to root 1 ask for root/2 next: a first file holding another version
        // would pass here and fail on every device.
        guard chain.current.version == 1 else {
            throw PublishError(.repositoryCorrupt, "\(rootPath(1)) holds root \(chain.current.version), not root 1")
        }
        for version in 2...max(2, newest) where version <= newest {
            let bytes = try rootBytes(version)
            do { try chain.accept(next: bytes) } catch { throw refused(version, error) }
        }
        return chain
    }

    /// The bytes of `root/<n>.root.json`.
    public func rootBytes(_ version: Int) throws(PublishError) -> [UInt8] {
        do { return try FileSystem.read(rootPath(version)) } catch {
            throw PublishError(.repositoryCorrupt, "\(rootPath(version)) is missing or unreadable: the root chain has a gap", cause: error)
        }
    }

    /// The repository's trust: its root chain and `keys` for manifests older than root 1.
    public func trust(keys: [PublicKey]) throws(PublishError) -> RepositoryTrust {
        RepositoryTrust(roots: try rootChain()?.roots ?? [], keys: keys)
    }

    /// The manifest in the file at `path`, verified under the root in force when it was created.
    public func manifest(at path: String, trust: RepositoryTrust) throws(PublishError) -> Manifest {
        try signedManifest(at: path, trust: trust).manifest
    }

    /// The manifest in the file at `path`, verified as `manifest(at:trust:)` does, with the
    /// envelope it came in, so that further keys can be checked against the same bytes.
    public func signedManifest(at path: String, trust: RepositoryTrust) throws(PublishError) -> (manifest: Manifest, envelope: SignedEnvelope) {
        let bytes: [UInt8]
        do { bytes = try FileSystem.read(path) } catch {
            throw PublishError(.io, "cannot read \(path): \(error.message)", cause: error)
        }
        do throws(CoreError) {
            let envelope = try SignedManifest.decodeEnvelope(bytes)
            // Its `created` alone picks the root to check it under; the signatures are checked
            // before the rest is read, so an unsigned file is never taken for newer software's.
            guard let created = Self.created(of: envelope.content) else {
                throw CoreError(.manifestMalformed, "field `created` is missing or not an RFC 3339 UTC time")
            }
            let (policy, root) = trust.policy(forCreated: created)
            do { return (try SignedManifest.decodeAndVerify(bytes, policy: policy), envelope) } catch {
                let under = root.map { "root \($0)" } ?? "the trusted keys"
                throw CoreError(error.code, "\(error.message) (checked under \(under), in force when it was created)")
            }
        } catch {
            throw PublishError(.repositoryCorrupt, "\(path): \(error.code): \(error.message)", cause: error)
        }
    }

    /// Writes `root/<n>.root.json`, which must not exist (roots are immutable).
    public func writeRoot(_ bytes: [UInt8], version: Int) throws(PublishError) {
        let path = rootPath(version)
        do {
            try FileSystem.makeDirectory(rootFolder)
            try FileSystem.createAtomically(bytes, at: path)
        } catch {
            throw PublishError.creating(path, error)
        }
    }

    /// The newest `created` among every channel's published and staged manifests that a new
    /// root or manifest is dated after: that of the manifests a key `inForce` signed, and, no
    /// later than `now`, of those only `others` signed (a signature checked, not a threshold). A
    /// revoked key's manifest dated ahead of the clock is a thief's, and would date what follows
    /// (and every device's clock floor) after it; in 9999, nothing could follow it. A file no
    /// key of the repository signed (copied from another repository, planted) does not count.
    func newestManifestCreated(inForce: [PublicKey], others: [PublicKey], now: Timestamp) -> Timestamp? {
        let inForceIDs = Set(inForce.map(\.keyID))
        let keys = inForce + others.filter { !inForce.contains($0) }
        var newest: Timestamp?
        for channel in channels() {
            let paths = versionNumbers(channel).map { versionPath(channel, $0) } + stagedVersions(channel).map { stagedPath(channel, $0) }
            for path in paths {
                guard let bytes = try? FileSystem.read(path), let envelope = try? SignedManifest.decodeEnvelope(bytes),
                      case let signers = envelope.validSigners(among: keys, domain: SignedManifest.domain), !signers.isEmpty,
                      let signedCreated = Self.created(of: envelope.content) else { continue }
                let created = signers.isDisjoint(with: inForceIDs) ? min(signedCreated, now) : signedCreated
                newest = max(newest ?? created, created)
            }
        }
        return newest
    }

    /// A signed manifest's `created`, read alone (as `Manifest(json:)` reads it): a manifest newer
    /// software wrote (a field this build does not know) still dates what follows it.
    static func created(of content: CanonicalJSON) -> Timestamp? {
        guard case .object(let members) = content, case .string(let text)? = members["created"] else { return nil }
        return Timestamp(rfc3339: text)
    }
}
