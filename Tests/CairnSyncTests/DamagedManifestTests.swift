import CairnTestSupport
import CairnCore
import CairnStore
import CairnSync
import Foundation
import Testing

/// An installed manifest that changed on the disk since its install but still reads (a digit of
/// a hash): the next attempt that reaches a source offering that version writes the source's
/// copy over it when the installed index holds its state root (protocol/data-directory.md, "A
/// downgrade").
@Suite("A damaged installed manifest written again", .offCooperativePool)
struct DamagedManifestTests {
    /// Changes the first hex digit after `field` (`"state_root":"`, or the snapshot's
    /// `"sha256":"`) in the manifest at `path`: the file still parses; its signature fails.
    static func damage(_ path: String, after field: String) throws {
        var text = try String(contentsOfFile: path, encoding: .utf8)
        let from = field == fields[0] ? try #require(text.range(of: #""snapshot":{"#)).upperBound : text.startIndex
        let at = try #require(text.range(of: field, range: from..<text.endIndex)).upperBound
        text.replaceSubrange(at...at, with: text[at] == "0" ? "1" : "0")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    static let fields = [#""sha256":""#, #""state_root":""#]

    /// Versions 1 and 2 (by a delta) installed, the device told its signers as cairnd is at start.
    static func onVersion2() async throws -> (RepoFixture, Device) {
        let repo = try RepoFixture(withModel: false)
        let device = try Device(repo: repo, sources: [repo.url])
        device.directory.knowManifestSigners(of: device.configuration)
        try repo.publish(version: 1)
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), deltasFrom: [1])
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        return (repo, device)
    }

    /// `onVersion2` with a digit of version 2's snapshot hash changed in its manifest (the path),
    /// and the damaged bytes.
    static func onDamagedVersion2() async throws -> (RepoFixture, Device, manifest: String, damaged: [UInt8]) {
        let (repo, device) = try await onVersion2()
        let manifest = device.path + "/versions/2/manifest.json"
        try damage(manifest, after: fields[0])
        return (repo, device, manifest, try FileSystem.read(manifest))
    }

    @Test("Given versions 1 and 2 installed, when version 2's manifest changes on the disk so that it still reads (a digit of the snapshot's hash, or of the state root), then the next attempt writes the source's copy over it and is up to date: nothing downloaded or built, the index file and the links as they were, and the manifest verifies again",
          arguments: fields)
    func writtenAgainFromTheSource(field: String) async throws {
        let (repo, device) = try await Self.onVersion2()
        let manifest = device.path + "/versions/2/manifest.json"
        let index = device.path + "/versions/2/index.sqlite", before = InPlaceDeltaTests.inode(index)
        try Self.damage(manifest, after: field)
        #expect(device.directory.installed().map(device.directory.manifestDamage) != .some(nil))

        #expect(await device.syncer.syncOnce().isUpToDate)
        #expect(try FileSystem.read(manifest) == repo.manifestBytes[2])
        #expect(device.directory.installed().map(device.directory.manifestDamage) == .some(nil))
        #expect(InPlaceDeltaTests.inode(index) == before && before != nil)
        #expect(!FileManager.default.fileExists(atPath: device.path + "/versions/2/" + DataDirectoryLayout.snapshotBlobFile))
        #expect(device.currentTarget == "versions/2" && device.previousTarget == "versions/1")
        #expect(device.entries("versions") == ["1", "2"])
    }

    @Test("Given version 2's manifest damaged so that it still reads, when the source offers a version 2 whose state root the installed index does not hold, then it is refused as a reuse of the number and the damaged file is left as it is")
    func anotherStateRootRefused() async throws {
        let (repo, device, manifest, damaged) = try await Self.onDamagedVersion2()
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 3))
        let outcome = await device.syncer.syncOnce()
        #expect(outcome.errorCode == "rollback" && device.state.lastError?.message.contains("reuses version 2") == true, "\(outcome)")
        #expect(try FileSystem.read(manifest) == damaged)
    }

    @Test("Given version 2's manifest damaged so that it still reads, when the source's version 2 is the same version signed again (another expiry: the same state root, other bytes), then it is not written over the damaged file (it may name other blobs than the folder holds), and the attempt is up to date")
    func copySignedAgainLeft() async throws {
        let (repo, device, manifest, damaged) = try await Self.onDamagedVersion2()
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), deltasFrom: [1], expires: Date().addingTimeInterval(86_400 * 90))
        #expect(await device.syncer.syncOnce().isUpToDate)
        #expect(try FileSystem.read(manifest) == damaged)
    }

    @Test("Given version 2's manifest changed on the disk in its version digit (it names version 3 from version 2's folder), then it is damage, not version 3: the installed version does not read, a source offering version 1 meanwhile is refused as a rollback, and version 2 installs again over its folder")
    func versionDigitIsDamage() async throws {
        let (repo, device) = try await Self.onVersion2()
        let manifest = device.path + "/versions/2/manifest.json"
        var text = try String(contentsOfFile: manifest, encoding: .utf8)
        let field = try #require(text.range(of: #","version":2"#))
        text.replaceSubrange(field, with: #","version":3"#)
        try text.write(toFile: manifest, atomically: true, encoding: .utf8)
        #expect(device.directory.installed() == nil)

        try repo.makeCurrent(1)
        #expect(await device.syncer.syncOnce().errorCode == "rollback")
        try repo.makeCurrent(2)
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        #expect(try FileSystem.read(manifest) == repo.manifestBytes[2])
        #expect(device.currentTarget == "versions/2" && device.entries("versions") == ["1", "2"])
    }

    @Test("Given a rollback from version 2 to 1 (2 held back), when version 1's manifest changes in its version digit while cairnd runs (it no longer reads), then version 2, which the source still offers, stays held back")
    func holdCountsWhileTheManifestDoesNotRead() async throws {
        let (_, device) = try await Self.onVersion2()
        #expect(try await device.syncer.rollback().version.version == 1)
        let manifest = device.path + "/versions/1/manifest.json"
        var text = try String(contentsOfFile: manifest, encoding: .utf8)
        text.replaceSubrange(try #require(text.range(of: #","version":1"#)), with: #","version":4"#)
        try text.write(toFile: manifest, atomically: true, encoding: .utf8)
        #expect(device.directory.installed() == nil)

        #expect(await device.syncer.syncOnce().isUpToDate)
        #expect(device.currentTarget == "versions/1" && device.state.heldBackVersion == 2)
    }

    @Test("Given a device pinned to a root, rolled back from version 2 to 1 (2 held back), when version 1's manifest changes on the disk so that it still reads, then that is no version signed by revoked keys: the device does not enter recovery, and version 2 stays held back")
    func damageIsNoRecovery() async throws {
        let (repo, device, _, _, _) = try await TrustSyncTests.pinnedOnVersion1(namingSigners: true)
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), deltasFrom: [1])
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        #expect(try await device.syncer.rollback().version.version == 1)
        try Self.damage(device.path + "/versions/1/manifest.json", after: Self.fields[0])

        #expect(await device.syncer.syncOnce().isUpToDate)
        #expect(device.state.recoveringFrom == nil && device.state.heldBackVersion == 2)
        #expect(device.currentTarget == "versions/1")
    }
}
