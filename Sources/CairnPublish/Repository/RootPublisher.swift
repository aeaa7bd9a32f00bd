public import CairnCore
import CairnStore
public import Foundation

/// Writes a repository's root of trust (protocol/root.md): root 1, and each rotation, under the
/// publish lock, checked as a device would check it before anything is written.
public enum RootPublisher {
    /// What a rotation changes; everything not named stays as in the current root.
    public struct Rotation: Sendable {
        public var addRootKeys: [PublicKey] = []
        public var removeRootKeys: [PublicKey] = []
        public var rootThreshold: Int?
        public var addSigningKeys: [PublicKey] = []
        public var removeSigningKeys: [PublicKey] = []
        public var signingThreshold: Int?
        public var expiresDays = 365

        public init() {}
    }

    /// Writes root 1: `rootKeys` (which all sign it) with `rootThreshold`, `signingKeys` with
    /// `signingThreshold`, expiring `expiresDays` from now.
    /// - Throws: `.invalidArgument` when the repository has a root already or a value is out of
    ///   range; `.thresholdNotMet` with fewer root keys than the root threshold; `.io`, `.locked`.
    public static func initialize(repository: Repository, rootKeys: [PublisherKey], rootThreshold: Int,
                                  signingKeys: [PublicKey], signingThreshold: Int, expiresDays: Int,
                                  lockWait: Double = 5, now: Date = Date()) throws(PublishError) -> RootMetadata {
        do { try FileSystem.makeDirectory(repository.root) } catch { throw PublishError(.io, error.message, cause: error) }
        let lock = try PublishLock(repository: repository.root, wait: lockWait)
        defer { withExtendedLifetime(lock) {} }
        guard repository.rootVersions().isEmpty else {
            throw PublishError(.invalidArgument, "\(repository.rootFolder) already holds a root; change it with cairn-server root rotate")
        }
        let created = try timestamp(Int64(now.timeIntervalSince1970))
        let root = try make(version: 1, created: created, expiresDays: expiresDays, rootKeys: rootKeys.map(\.publicKey),
                            rootThreshold: rootThreshold, signingKeys: signingKeys, signingThreshold: signingThreshold)
        let bytes = SignedRoot.encode(root, signingKeys: rootKeys)
        do { _ = try SignedRoot.verifySelfSigned(bytes) } catch {
            throw PublishError(.thresholdNotMet, "root 1 would not verify: \(error.message)", cause: error)
        }
        try repository.writeRoot(bytes, version: 1)
        return root
    }

    /// Writes root N+1 from the newest root N with `rotation` applied, signed by `signWith`
    /// (root keys of N and of N+1), dated after every manifest already published.
    /// - Throws: `.thresholdNotMet` when the signatures do not meet both thresholds (nothing is
    ///   written), `.invalidArgument`, `.repositoryCorrupt` (no root, a broken chain), `.io`, `.locked`.
    public static func rotate(repository: Repository, signWith: [PublisherKey], rotation: Rotation,
                              lockWait: Double = 5, now: Date = Date()) throws(PublishError) -> RootMetadata {
        let lock = try PublishLock(repository: repository.root, wait: lockWait)
        defer { withExtendedLifetime(lock) {} }
        guard let chain = try repository.rootChain() else {
            throw PublishError(.invalidArgument, "\(repository.root) has no root yet; write root 1 with cairn-server root init")
        }
        let current = chain.current
        try check(rotation, of: current)
        let rootKeys = current.rootKeys.filter { !rotation.removeRootKeys.contains($0) } + rotation.addRootKeys
        let signingKeys = current.signingKeys.filter { !rotation.removeSigningKeys.contains($0) } + rotation.addSigningKeys
        // Later than the current root and than every manifest, so that the root in force for a
        // manifest is the newest one created before it; one signed only by keys the new root
        // does not hold counts no later than the clock (the key this rotation revokes may be
        // a thief's: in 9999, the rotation could not be written at all).
        let newest = repository.newestManifestCreated(inForce: signingKeys, others: chain.roots.flatMap(\.signingKeys) + repository.storedKeys(),
                                                      now: Timestamp(clamping: now))
        let floor = max(current.created.secondsSince1970, newest?.secondsSince1970 ?? 0) + 1
        let now = Int64(now.timeIntervalSince1970)
        let created = try timestamp(max(now, floor))
        let next = try make(version: current.version + 1, created: created, expiresDays: rotation.expiresDays,
                            rootKeys: rootKeys, rootThreshold: rotation.rootThreshold ?? min(current.rootThreshold, rootKeys.count),
                            signingKeys: signingKeys,
                            signingThreshold: rotation.signingThreshold ?? min(current.signingThreshold, signingKeys.count))
        let allowed = Set((current.rootKeys + next.rootKeys).map(\.keyID))
        for key in signWith where !allowed.contains(key.keyID) {
            throw PublishError(.invalidArgument, "key \(key.keyID) is a root key of neither root \(current.version) nor root \(next.version)")
        }
        let bytes = SignedRoot.encode(next, signingKeys: signWith)
        do { _ = try SignedRoot.verifyNext(bytes, after: current) } catch {
            throw PublishError(.thresholdNotMet, "root \(next.version) would be refused by devices: \(error.message); pass more --sign-with keys", cause: error)
        }
        try repository.writeRoot(bytes, version: next.version)
        return next
    }

    /// Refuses a rotation that would not do what its operator meant: removing a key `current`
    /// does not hold (the wrong .pub file: the key believed revoked would still sign), adding
    /// one it holds, or leaving fewer keys than a threshold without naming the new threshold
    /// (2 of 3 with two removed would become 1 of 1 unasked).
    private static func check(_ rotation: Rotation, of current: RootMetadata) throws(PublishError) {
        let lists: [(kind: String, held: [PublicKey], removed: [PublicKey], added: [PublicKey], threshold: Int, given: Int?, flag: String)] = [
            ("root", current.rootKeys, rotation.removeRootKeys, rotation.addRootKeys, current.rootThreshold, rotation.rootThreshold,
             "--root-threshold"),
            ("signing", current.signingKeys, rotation.removeSigningKeys, rotation.addSigningKeys, current.signingThreshold,
             rotation.signingThreshold, "--threshold"),
        ]
        for list in lists {
            if let absent = list.removed.first(where: { !list.held.contains($0) }) {
                throw PublishError(.invalidArgument, "key \(absent.keyID) is not a \(list.kind) key of root \(current.version); nothing to remove (is it the right .pub file?)")
            }
            if let present = list.added.first(where: { list.held.contains($0) && !list.removed.contains($0) }) {
                throw PublishError(.invalidArgument, "key \(present.keyID) is already a \(list.kind) key of root \(current.version)")
            }
            let count = list.held.filter { !list.removed.contains($0) }.count + list.added.count
            if list.given == nil, count < list.threshold {
                throw PublishError(.invalidArgument, "root \(current.version + 1) would hold \(count) \(list.kind) keys, fewer than the threshold \(list.threshold); give the new threshold with \(list.flag)")
            }
        }
    }

    private static func make(version: Int, created: Timestamp, expiresDays: Int, rootKeys: [PublicKey], rootThreshold: Int,
                             signingKeys: [PublicKey], signingThreshold: Int) throws(PublishError) -> RootMetadata {
        guard expiresDays >= 1 else { throw PublishError(.invalidArgument, "--expires-days must be at least 1") }
        let (days, overflow) = Int64(expiresDays).multipliedReportingOverflow(by: 86_400)
        let (end, endOverflow) = created.secondsSince1970.addingReportingOverflow(days)
        let expires = try timestamp(overflow || endOverflow ? .max : end)
        do {
            return try RootMetadata(version: version, created: created, expires: expires, rootKeys: rootKeys,
                                    rootThreshold: rootThreshold, signingKeys: signingKeys, signingThreshold: signingThreshold)
        } catch {
            throw PublishError(.invalidArgument, error.message, cause: error)
        }
    }

    private static func timestamp(_ seconds: Int64) throws(PublishError) -> Timestamp {
        guard let value = Timestamp(secondsSince1970: seconds) else {
            throw PublishError(.invalidArgument, "the clock or --expires-days is out of the root's range")
        }
        return value
    }
}
