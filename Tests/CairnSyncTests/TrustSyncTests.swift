import CairnTestSupport
import CairnCore
import CairnStore
import CairnSync
import Foundation
import Synchronization
import Testing

/// The device side of protocol/root.md with the syncer in process over a `file://` repository:
/// the chain walk's persistence, and the clock floor. The device clock is injected here (the
/// `now` the syncer reads): setting the machine's clock back would need root and would disturb
/// every other test, so this is the one fault of the issue that is simulated, not produced.
@Suite("trust: chain walk and clock floor (syncer in process)", .offCooperativePool)
struct TrustSyncTests {
    /// A device clock the test sets.
    final class Clock: Sendable {
        private let value: Mutex<Date>
        init(_ date: Date) { value = Mutex(date) }
        var now: Date { value.withLock { $0 } }
        func set(_ date: Date) { value.withLock { $0 = date } }
    }

    /// Root `version` with `rootKey` as its only root key and `signingKey` as its only signing
    /// key, signed by `signers`.
    static func root(_ version: Int, rootKey: PublisherKey, signingKey: PublisherKey, signers: [PublisherKey]) throws -> [UInt8] {
        let now = Timestamp(Date())!
        let root = try RootMetadata(version: version, created: now, expires: Timestamp(secondsSince1970: now.secondsSince1970 + 86_400)!,
                                    rootKeys: [rootKey.publicKey], rootThreshold: 1,
                                    signingKeys: [signingKey.publicKey], signingThreshold: 1)
        return SignedRoot.encode(root, signingKeys: signers)
    }

    static func put(_ bytes: [UInt8], root version: Int, in repo: RepoFixture) throws {
        try FileManager.default.createDirectory(atPath: repo.root + "/root", withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: repo.root + "/root/\(version).root.json"))
    }

    /// A repository whose root 1 (root key `rootKey`) names its key as the signing key, and
    /// root 1's bytes (`pinned`), which a device pins.
    static func rootedRepository() throws -> (repo: RepoFixture, rootKey: PublisherKey, pinned: [UInt8]) {
        let repo = try RepoFixture(withModel: false)
        let rootKey = PublisherKey.generate()
        let pinned = try root(1, rootKey: rootKey, signingKey: repo.key, signers: [rootKey])
        try put(pinned, root: 1, in: repo)
        return (repo, rootKey, pinned)
    }

    /// A device pinned to root 1, whose signing key is `repo.key` (A), with version 1 installed;
    /// `next` (B) for a root 2. `namingSigners`: told the chain's keys first, as cairnd is at start.
    static func pinnedOnVersion1(namingSigners: Bool = false) async throws
        -> (repo: RepoFixture, device: Device, rootKey: PublisherKey, next: PublisherKey, pinned: [UInt8]) {
        let (repo, rootKey, pinned) = try rootedRepository()
        let next = PublisherKey.generate()
        try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url], trustedRoot: pinned)
        if namingSigners { device.directory.knowManifestSigners(of: device.configuration) }
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        return (repo, device, rootKey, next, pinned)
    }

    /// The installed manifest at `path` with a field this build does not know added (what a
    /// newer publisher could sign, or a change on the disk), and the signatures it carried.
    static func withUnknownField(_ path: String) throws -> (content: CanonicalJSON, signatures: [SignedEnvelope.Signature]) {
        let envelope = try SignedManifest.decodeEnvelope(try FileSystem.read(path))
        guard case .object(var fields) = envelope.content else { throw StepFailed("\(path) is not a manifest object") }
        fields["regions"] = .array([.string("north")])
        return (.object(fields), envelope.signatures)
    }

    @Test("Given roots 2 and 3 that chain and a forged root 4, when the device walks, then 2 and 3 are persisted before the refusal, root 3 is current, and a restart keeps them")
    func walkPersistsEachStep() async throws {
        let (repo, rootKey, pinned) = try Self.rootedRepository()
        try Self.put(try Self.root(2, rootKey: rootKey, signingKey: repo.key, signers: [rootKey]), root: 2, in: repo)
        try Self.put(try Self.root(3, rootKey: rootKey, signingKey: repo.key, signers: [rootKey]), root: 3, in: repo)
        let stranger = PublisherKey.generate()
        try Self.put(try Self.root(4, rootKey: stranger, signingKey: stranger, signers: [stranger]), root: 4, in: repo)
        try repo.publish(version: 1)

        var device: Device? = try Device(repo: repo, sources: [repo.url], trustedRoot: pinned)
        #expect(await device!.syncer.syncOnce().errorCode == "root_refused")
        #expect(device!.entries("roots") == ["1.root.json", "2.root.json", "3.root.json"])
        #expect(device!.syncer.trust.current?.current.version == 3)
        #expect(device!.currentTarget == nil, "nothing installs from a source whose chain is refused")

        // Once the forgery is gone the manifest, signed by a signing key of root 3, installs; a
        // restart on the same directory starts from root 3 without fetching anything.
        try FileManager.default.removeItem(atPath: repo.root + "/root/4.root.json")
        #expect(await device!.syncer.syncOnce().installedVersion == 1)
        let path = device!.path
        device = nil // the process "dies": its lock goes with it
        let restarted = try Device(repo: repo, sources: [], path: path, trustedRoot: pinned)
        #expect(restarted.syncer.trust.current?.current.version == 3)
    }

    @Test("Given a device exactly as many roots behind as one attempt walks (1,024), when it syncs, then it walks them all and installs, not refused as offered more; one root more is refused naming the cap, and the next attempt goes on from there")
    func rootWalkCap() async throws {
        let (repo, rootKey, pinned) = try Self.rootedRepository()
        let cap = Syncer.maxRootSteps
        for version in 2...(1 + cap) {
            try Self.put(try Self.root(version, rootKey: rootKey, signingKey: repo.key, signers: [rootKey]), root: version, in: repo)
        }
        try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url], trustedRoot: pinned)
        // Until 2026-12-07 the cap was checked before asking for the next root: refused here.
        let walked = await device.syncer.syncOnce()
        #expect(walked.installedVersion == 1, "\(walked)")
        #expect(device.syncer.trust.current?.current.version == 1 + cap)

        for version in (2 + cap)...(2 + 2 * cap) {
            try Self.put(try Self.root(version, rootKey: rootKey, signingKey: repo.key, signers: [rootKey]), root: version, in: repo)
        }
        let capped = await device.syncer.syncOnce()
        #expect(capped.errorCode == "root_refused" && device.state.lastError?.message.contains("more than \(cap) new roots") == true,
                "\(capped)")
        #expect(device.syncer.trust.current?.current.version == 1 + 2 * cap)
        _ = await device.syncer.syncOnce()
        #expect(device.syncer.trust.current?.current.version == 2 + 2 * cap)
    }

    @Test("Given expired_updates = refuse and version 2 refused as expired, when the device clock is set back to 1970, then version 2 is still refused and the clock floor holds")
    func clockSetBack() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let clock = Clock(Date())
        var device: Device? = try Device(repo: repo, sources: [repo.url], expiredUpdates: .refuse, now: { clock.now })
        #expect(await device!.syncer.syncOnce().installedVersion == 1)
        let v2 = try repo.publish(version: 2, expires: Date().addingTimeInterval(-3_600))
        #expect(await device!.syncer.syncOnce().errorCode == "expired")
        let floor = try #require(device!.state.clockFloor.flatMap(Timestamp.init(rfc3339:)))
        #expect(floor >= v2.expires, "the floor rises to the expiry the device judged passed")

        // When the clock is reset to 1970, nothing it refused becomes acceptable.
        clock.set(Date(timeIntervalSince1970: 0))
        #expect(await device!.syncer.syncOnce().errorCode == "expired")
        #expect(device!.currentTarget == "versions/1")
        #expect(device!.state.effectiveNow(clock.now) >= v2.expires)
        // And a restart reads the floor back from state.json.
        let path = device!.path
        device = nil
        let restarted = try Device(repo: repo, sources: [repo.url], path: path, expiredUpdates: .refuse, now: { clock.now })
        #expect(await restarted.syncer.syncOnce().errorCode == "expired")
    }

    @Test("Given expired_updates = install, when an expired version 2 newer than 1 arrives, then it installs, counted, and the status says expired with its expiry")
    func expiredButNewerInstalls() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        let v2 = try repo.publish(version: 2, expires: Date().addingTimeInterval(-3_600))
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        #expect(device.state.expiredInstalls == 1)
        let status = SyncStatus(state: device.state, installed: device.directory.installed(), now: Date(),
                                pollInterval: .seconds(900), staleAfterPolls: 3)
        #expect(status.expired && status.expires == v2.expires.rfc3339 && status.stale)
    }

    @Test("Given a device pinned to root 1 whose persisted root 2 replaced signing key A by B, when version 1's installed manifest (signed by A) holds a field this build does not know, then it reads as a newer cairnd's while A's signature over it verifies (a revoked key still proves the bytes intact), and as damage once it does not; beside a signature by an unknown key, or with no signers named, it cannot tell and reads as a newer cairnd's")
    func installedManifestJudgedByEveryKeyOfTheChain() async throws {
        let (repo, device, rootKey, next, pinned) = try await Self.pinnedOnVersion1()
        try device.directory.persistRoot(try Self.root(2, rootKey: rootKey, signingKey: next, signers: [rootKey]), version: 2)
        let keys = device.directory.signingKeysOfChain(pinned: pinned)
        #expect(keys == [repo.key.publicKey, next.publicKey])

        let manifest = device.path + "/versions/1/manifest.json"
        let (content, original) = try Self.withUnknownField(manifest)
        let signed = SignedEnvelope(content: content, signatures: SignedEnvelope.sign(content, domain: SignedManifest.domain, keys: [repo.key]))
        device.directory.knowManifestSigners(of: device.configuration)
        try FileSystem.writeAtomically(signed.encode(field: "manifest"), to: manifest)
        #expect(device.directory.currentWrittenByNewerCairnd() != nil)

        // The same bytes under the original signature: what a change on the disk leaves.
        let changed = SignedEnvelope(content: content, signatures: original)
        try FileSystem.writeAtomically(changed.encode(field: "manifest"), to: manifest)
        #expect(device.directory.currentWrittenByNewerCairnd() == nil)
        #expect(device.directory.installed() == nil)
        // Beside a signature by a key this device does not know (a newer root's, which a newer
        // cairnd may have checked alone), it cannot tell.
        let stranger = PublisherKey.generate()
        let alsoSigned = SignedEnvelope(content: changed.content, signatures: changed.signatures
                                        + SignedEnvelope.sign(changed.content, domain: SignedManifest.domain, keys: [stranger]))
        try FileSystem.writeAtomically(alsoSigned.encode(field: "manifest"), to: manifest)
        #expect(device.directory.currentWrittenByNewerCairnd() != nil)
        try FileSystem.writeAtomically(changed.encode(field: "manifest"), to: manifest)
        device.directory.knowManifestSigners([])
        #expect(device.directory.currentWrittenByNewerCairnd() != nil)
    }

    @Test("Given a device pinned to root 1 (signing key A) that accepts root 2 (key B) while it runs and installs version 2 signed by B, when version 2's manifest then changes on the disk (a field added under B's signature), then it is damage: B counts as a known signer from the rotation on, not only from the next start")
    func signersFollowARotation() async throws {
        let (repo, device, rootKey, next, _) = try await Self.pinnedOnVersion1(namingSigners: true)
        try Self.put(try Self.root(2, rootKey: rootKey, signingKey: next, signers: [rootKey]), root: 2, in: repo)
        try repo.publish(version: 2, signer: next)
        #expect(await device.syncer.syncOnce().installedVersion == 2)

        let manifest = device.path + "/versions/2/manifest.json"
        let (content, signatures) = try Self.withUnknownField(manifest)
        try FileSystem.writeAtomically(SignedEnvelope(content: content, signatures: signatures).encode(field: "manifest"), to: manifest)
        #expect(device.directory.currentWrittenByNewerCairnd() == nil)
        #expect(device.directory.installed() == nil)
    }
}
