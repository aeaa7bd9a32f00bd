import CairnTestSupport
import CairnCore
import CairnStore
import CairnSync
import Foundation
import Testing

@Suite("Refusals: nothing is installed and the old version keeps serving", .offCooperativePool)
struct RefusalTests {
    @Test("Given version 2 installed, when the source serves the older signed version 1, then it is refused as a rollback")
    func rollback() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        try repo.publish(version: 2)
        let device = try Device(repo: repo, sources: [repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        try repo.makeCurrent(1)
        #expect(await device.syncer.syncOnce().errorCode == "rollback")
        #expect(device.currentTarget == "versions/2")
        #expect(device.state.lastError?.code == "rollback")
        #expect(device.directory.installed()?.version == 2)
    }

    @Test("Given a device pinned to two keys with version 1 (signed by the second) and 2 (by the first) installed, when the second is taken out of trusted_key, then a rollback to version 1 is refused and nothing changes; with both keys it goes through")
    func rollbackToAnUntrustedKeysVersion() async throws {
        let repo = try RepoFixture(withModel: false)
        let leaked = PublisherKey.generate()
        try repo.publish(version: 1, signer: leaked)
        let keys = [repo.key.publicKey, leaked.publicKey]
        var device: Device? = try Device(repo: repo, sources: [repo.url], keys: keys)
        #expect(await device!.syncer.syncOnce().installedVersion == 1)
        // The publisher's version 2 names no delta from the leaked key's version 1, which it
        // did not make.
        try repo.publish(version: 2)
        #expect(await device!.syncer.syncOnce().installedVersion == 2)
        let path = device!.path
        device = nil

        var pinned: Device? = try Device(repo: repo, sources: [repo.url], keys: [repo.key.publicKey], path: path)
        await #expect { try await pinned!.syncer.rollback() } throws: { error in
            (error as? SyncError)?.code == .previousUnusable && (error as? SyncError)?.message.contains("trusted_key") == true
        }
        #expect(pinned!.currentTarget == "versions/2" && pinned!.previousTarget == "versions/1")
        #expect(pinned!.state.heldBackVersion == nil)
        pinned = nil

        let both = try Device(repo: repo, sources: [repo.url], keys: keys, path: path)
        #expect(try await both.syncer.rollback().version.version == 1)
    }

    @Test("Given a routine change of key on a device pinned to keys (version 1 by the old key, version 2 by the new with a delta from 1), when the old key is unpinned, then a rollback to version 1 goes through: the installed version vouches for it")
    func rollbackAfterARoutineKeyChange() async throws {
        let repo = try RepoFixture(withModel: false)
        let old = PublisherKey.generate()
        try repo.publish(version: 1, signer: old)
        var device: Device? = try Device(repo: repo, sources: [repo.url], keys: [repo.key.publicKey, old.publicKey])
        #expect(await device!.syncer.syncOnce().installedVersion == 1)
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), deltasFrom: [1])
        #expect(await device!.syncer.syncOnce().installedVersion == 2)
        let path = device!.path
        device = nil
        let pinned = try Device(repo: repo, sources: [repo.url], keys: [repo.key.publicKey], path: path)
        #expect(try await pinned.syncer.rollback().version.version == 1)
    }

    @Test("Given version 1 installed and expired_updates = refuse, when version 2 has expired, then it is refused and the status says stale")
    func expired() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url], expiredUpdates: .refuse)
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        try repo.publish(version: 2, expires: Date().addingTimeInterval(-60))
        #expect(await device.syncer.syncOnce().errorCode == "expired")
        #expect(device.currentTarget == "versions/1")
        let status = SyncStatus(state: device.state, installed: device.directory.installed(), now: Date(),
                                pollInterval: .seconds(900), staleAfterPolls: 3)
        #expect(status.stale && status.online && status.installedVersion == 1 && status.highestVersionSeen == 2)
    }

    @Test("Given a manifest signed by a key the device does not trust, then it is refused")
    func unknownKey() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1, signer: PublisherKey.generate())
        let device = try Device(repo: repo, sources: [repo.url])
        #expect(await device.syncer.syncOnce().errorCode == "manifest_refused")
        #expect(device.currentTarget == nil && device.entries("versions").isEmpty)
    }

    // protocol/threat-model.md: what a malicious mirror can serve, and that none of it installs.
    @Test("Given version 1 installed, when a mirror serves a manifest signed for another channel at this channel's path, then it is refused as channel_mismatch")
    func otherChannel() async throws {
        let (repo, device) = try await versionOneInstalled()
        try repo.publish(version: 2) { $0.channel = "beta" }
        #expect(await device.syncer.syncOnce().errorCode == "channel_mismatch")
        #expect(device.currentTarget == "versions/1" && device.entries("versions") == ["1"])
    }

    @Test("Given version 1 installed, when a mirror serves version 2's manifest altered after signing or stripped of its signature, then each is refused and nothing is fetched")
    func alteredOrUnsigned() async throws {
        let (repo, device) = try await versionOneInstalled()
        try repo.publish(version: 2, current: false)
        let signed = String(decoding: repo.manifestBytes[2]!, as: UTF8.self)
        let altered = signed.replacingOccurrences(of: "\"chunk_count\":40", with: "\"chunk_count\":41")
        guard case .object(var file) = try CanonicalJSON.parse(repo.manifestBytes[2]!) else { throw TestSkip("not an object") }
        file["signatures"] = .array([])
        let unsigned = String(decoding: CanonicalJSON.object(file).bytes, as: UTF8.self) + "\n"
        #expect(altered != signed && unsigned != signed)
        for forged in [altered, unsigned] {
            try FileSystem.writeAtomically(Array(forged.utf8), to: "\(repo.root)/channels/stable/manifest.json")
            #expect(await device.syncer.syncOnce().errorCode == "manifest_refused")
            #expect(device.currentTarget == "versions/1" && device.entries("versions") == ["1"])
            #expect(device.entries("staging").isEmpty)
        }
    }

    @Test("Given version 1 installed and one mirror, when it serves version 2's snapshot with one byte changed, then hash_mismatch and version 1 keeps serving")
    func blobNotMatching() async throws {
        let (repo, device) = try await versionOneInstalled()
        let manifest = try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2))
        var bytes = try FileSystem.read(repo.blobs.path(of: manifest.snapshot.sha256))
        bytes[bytes.count / 2] ^= 0x01
        try repo.overwriteBlob(manifest.snapshot.sha256, with: bytes)
        #expect(await device.syncer.syncOnce().errorCode == "hash_mismatch")
        #expect(device.currentTarget == "versions/1" && device.entries("versions") == ["1"])
        #expect(device.state.lastError?.code == "hash_mismatch")
    }

    @Test("Given version 1 installed, when a mirror serves a 4 MiB manifest, then the transfer stops at the 1 MiB cap with size_exceeded")
    func hugeManifest() async throws {
        let (repo, device) = try await versionOneInstalled()
        try FileSystem.writeAtomically([UInt8](repeating: 0x20, count: 4 << 20) + repo.manifestBytes[1]!,
                                       to: "\(repo.root)/channels/stable/manifest.json")
        #expect(await device.syncer.syncOnce().errorCode == "size_exceeded")
        #expect(device.currentTarget == "versions/1" && device.entries("versions") == ["1"])
    }

    @Test("Given a snapshot that inflates past its stated size (a bomb), then the install is refused and nothing is left")
    func decompressionBomb() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1) { $0.snapshot.uncompressedSize = 4_096 }
        let device = try Device(repo: repo, sources: [repo.url])
        let outcome = await device.syncer.syncOnce()
        #expect(outcome.errorCode == "install_failed")
        #expect(device.state.lastError?.message.contains("stated size") == true)
        #expect(device.currentTarget == nil && device.entries("versions").isEmpty)
    }

    @Test("Given a source failing, when it answers again but the version does not fit the device's disk budget, then the attempt fails disk_budget and the source is healthy: the failure is the device's")
    func devicesOwnFailureLeavesTheSourceHealthy() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url], maxDiskBytes: 1024)
        let away = repo.root + ".away"
        #expect(rename(repo.root, away) == 0)
        #expect(await device.syncer.syncOnce().errorCode != nil)
        #expect(device.state.sources?.first?.consecutiveFailures == 1)
        #expect(rename(away, repo.root) == 0)
        #expect(await device.syncer.syncOnce().errorCode == "disk_budget")
        let health = try #require(device.state.sources?.first)
        #expect(health.consecutiveFailures == 0 && health.lastError == nil && health.lastOK != nil, "\(health)")
        #expect(device.state.lastError?.code == "disk_budget")
    }

    @Test("Given a model damaged on the device's disk since it was installed (its sizes unchanged), when the next version's canaries cannot load it, then the attempt fails io saying so, the model folder is removed, the source is not counted failing, and the next attempt downloads the model and installs the version")
    func damagedModelDownloadedAgain() async throws {
        let repo = try RepoFixture()
        try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        let name = try #require(device.entries("models").first)
        let weights = device.path + "/models/\(name)/model.safetensors"
        var bytes = try FileSystem.read(weights)
        for i in 0..<8 { bytes[i] = 0xFF }  // the header's length: no model reads
        try Data(bytes).write(to: URL(fileURLWithPath: weights))
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), deltasFrom: [1],
                         canaries: [Canary(query: "flood maps", expect: ["chunk-000"], k: 40, mode: "hybrid")])
        let failed = await device.syncer.syncOnce()
        #expect(failed.errorCode == "io" && device.state.lastError?.message.contains("signed SHA-256") == true, "\(failed)")
        #expect(device.entries("models").isEmpty)
        #expect(device.state.sources?.first?.consecutiveFailures == 0)
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        let signed = try #require(repo.modelFiles.first { $0.name == "model.safetensors" })
        #expect(try FileSystem.sha256(of: weights).id == signed.sha256)
    }

    @Test("Given a manifest stating a 2^53-byte snapshot, then it is refused for disk space before any blob is requested")
    func hugeBlob() async throws {
        let repo = try RepoFixture()
        try repo.publish(version: 1) { $0.snapshot.size = 1 << 53 }
        let nginx = try Nginx(root: repo.root)
        defer { nginx.stop() }
        let device = try Device(repo: repo, sources: [nginx.url])
        #expect(await device.syncer.syncOnce().errorCode == "disk_full")
        #expect(!nginx.accessLog.contains { $0.hasPrefix("/blobs/") })
        #expect(device.entries("staging").isEmpty)
    }

    @Test("Given a canary that the new index fails, then the version is refused and the old one keeps serving; the next attempts refuse it without downloading its snapshot again, and the version signed again with its canary corrected installs")
    func canaryFailure() async throws {
        let repo = try RepoFixture()
        try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        let refused = try repo.publish(version: 2, canaries: [Canary(query: "storm water", expect: ["no-such-chunk"], k: 5)])
        #expect(await device.syncer.syncOnce().errorCode == "canary_failed")
        #expect(await device.syncer.lastAttemptStats.totalBytes > Int64(refused.snapshot.size))
        #expect(device.currentTarget == "versions/1" && device.entries("versions") == ["1"])
        let again = await device.syncer.syncOnce()
        #expect(again.errorCode == "canary_failed")
        #expect(await device.syncer.lastAttemptStats.totalBytes < Int64(refused.snapshot.size))
        #expect(device.state.lastError?.message.contains("not downloaded again") == true, "\(String(describing: device.state.lastError))")
        // The same version signed again with its canary corrected: another manifest, installed,
        // from the snapshot the refused install left staged (it is not downloaded again).
        try repo.publish(version: 2)
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        #expect(await device.syncer.lastAttemptStats.totalBytes < Int64(refused.snapshot.size))
        #expect(device.entries("staging").isEmpty)
    }

    @Test("Given a lagging mirror offering version 2 and the origin offering version 3, each failing a canary, when the device tries both again, then neither is built again: each source's refusal says it was refused before")
    func twoRefusedVersionsRemembered() async throws {
        let repo = try RepoFixture()
        try repo.publish(version: 1)
        let mirror = try TemporaryDirectory.make() + "/mirror"
        try FileManager.default.copyItem(atPath: repo.root, toPath: mirror)
        let device = try Device(repo: repo, sources: ["file://" + mirror, repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        // The mirror copies version 2; the origin has moved on to version 3.
        try repo.publish(version: 2, canaries: [Canary(query: "storm water", expect: ["no-such-chunk"], k: 5)])
        try FileManager.default.removeItem(atPath: mirror)
        try FileManager.default.copyItem(atPath: repo.root, toPath: mirror)
        try repo.publish(version: 3, canaries: [Canary(query: "storm water", expect: ["no-such-chunk"], k: 5)])
        #expect(await device.syncer.syncOnce().errorCode == "canary_failed")
        #expect(await device.syncer.syncOnce().errorCode == "canary_failed")
        let health = device.state.sources ?? []
        for url in ["file://" + mirror, repo.url] {
            let error = health.first { $0.url == url }?.lastError ?? ""
            #expect(error.hasPrefix("canary_failed") && error.contains("refused before"), "\(url): \(error)")
        }
    }

    @Test("Given version 2 refused for a canary (its snapshot kept in staging, to try again without a download), when version 3 replaces it at the only source and is refused too, then version 2's download goes and version 3's stays; with a second source out of reach, nothing goes")
    func refusedDownloadsDoNotPileUp() async throws {
        let repo = try RepoFixture()
        try repo.publish(version: 1)
        var device: Device! = try Device(repo: repo, sources: [repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        let failing = [Canary(query: "storm water", expect: ["no-such-chunk"], k: 5)]
        let v2 = try repo.publish(version: 2, canaries: failing)
        #expect(await device.syncer.syncOnce().errorCode == "canary_failed")
        #expect(device.entries("staging") == [v2.snapshot.sha256.hex + ".partial"])
        let v3 = try repo.publish(version: 3, canaries: failing)
        #expect(await device.syncer.syncOnce().errorCode == "canary_failed")
        #expect(device.entries("staging") == [v3.snapshot.sha256.hex + ".partial"])

        // A source not reached may still offer a download: none goes.
        let v4 = try repo.publish(version: 4, canaries: failing)
        let path = device.path
        device = nil  // its lock goes with it, as with a restarted cairnd
        let partly = try Device(repo: repo, sources: [repo.url, "http://127.0.0.1:9/repo"], path: path)
        #expect(await partly.syncer.syncOnce().errorCode == "canary_failed")
        #expect(Set(partly.entries("staging")) == [v3.snapshot.sha256.hex + ".partial", v4.snapshot.sha256.hex + ".partial"])
    }

    /// A repository (without a model) with version 1 published, and a device that installed it.
    func versionOneInstalled() async throws -> (RepoFixture, Device) {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url])
        try #require(await device.syncer.syncOnce().installedVersion == 1)
        return (repo, device)
    }
}
