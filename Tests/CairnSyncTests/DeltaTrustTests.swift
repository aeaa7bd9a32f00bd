import CairnTestSupport
import CairnCore
import CairnIndex
import CairnStore
import CairnSync
import Foundation
import Testing

/// A delta install checks only what the delta changed (protocol/snapshot.md, "Verification
/// after a delta"): these tests show what that still refuses.
@Suite("What a delta install still refuses", .offCooperativePool)
struct DeltaTrustTests {
    /// A lexical-only repository at version 1 and a device that installed it in full.
    static func deviceOnVersion1(deltasWithSetHash: Bool = true, withModel: Bool = false) async throws -> (RepoFixture, Device) {
        let repo = try RepoFixture(withModel: withModel)
        repo.deltasWithSetHash = deltasWithSetHash
        try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        return (repo, device)
    }

    @Test("Given a signed delta whose upserted row was changed after the state root (and, in format 2, the set hash) was signed, then it is refused and version 1 keeps serving", arguments: [true, false])
    func tamperedUpsert(withSetHash: Bool) async throws {
        let (repo, device) = try await Self.deviceOnVersion1(deltasWithSetHash: withSetHash)

        // The genuine version 2, then a delta to it whose upsert says something else; the
        // publisher's key signs a manifest naming that delta's blob (its SHA-256 is right).
        let genuine = try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), current: false)
        let (ref, upserted) = try repo.tamperedDelta(from: 1, to: 2, content: "flood maps: drink the flood water")
        #expect(upserted == ["chunk-000"])
        let v2 = try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2)) { $0.deltas = [ref] }
        #expect(v2.stateRoot == genuine.stateRoot)
        // No snapshot to fall back on: the delta alone decides.
        let snapshotPath = repo.blobs.path(of: v2.snapshot.sha256)
        let snapshot = try FileSystem.read(snapshotPath)
        unlink(snapshotPath)

        let refused = await device.syncer.syncOnce()
        #expect(refused.installedVersion == nil && refused.errorCode != nil)
        #expect(device.currentTarget == "versions/1")
        let installed = try #require(device.directory.installed())
        #expect(try SearchIndex(path: installed.indexPath).chunk(id: "chunk-000")?.content == "flood maps revision 1")

        // With the snapshot back, the device falls back to it and serves the signed text.
        try FileSystem.writeAtomically(snapshot, to: snapshotPath)
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        let now = try #require(device.directory.installed())
        #expect(try SearchIndex(path: now.indexPath).chunk(id: "chunk-000")?.content == "flood maps revision 2")
        #expect(FileSystem.exists(device.path + "/versions/2/" + DataDirectoryLayout.snapshotBlobFile))
    }

    @Test("Given the installed index altered on disk while the device was stopped (a row's text and its stored hash), when a delta arrives, then the result is refused and the full snapshot installed instead — whether the restarted syncer has the rows files' leaves (as cairnd) or none", arguments: [true, false])
    func alteredBase(openRowsFiles: Bool) async throws {
        let (repo, path) = try await { () async throws -> (RepoFixture, String) in
            let (repo, stopped) = try await Self.deviceOnVersion1()
            return (repo, stopped.path)
        }()
        let base = path + "/versions/1/index.sqlite"
        let poison = "boil water before drinking? no need"
        try Database(path: base, mode: .readWrite).exec("UPDATE chunks SET content = '\(poison)', content_hash = '\(ContentID(hashing: Array(poison.utf8)).hex)' WHERE id = 'chunk-005'")
        // Restarted: with the rows files (written at install, before the edit), the syncer checks
        // the file against them in the background and, the file changed, checks the delta over
        // the file's stored hashes; without them, it checks over the stored hashes at once.
        let device = try Device(repo: repo, sources: [repo.url], path: path, openRowsFiles: openRowsFiles)

        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), deltasFrom: [1])
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        let installed = try #require(device.directory.installed())
        // The delta's result missed the signed state root, so the snapshot was used (it is kept).
        #expect(FileSystem.exists(device.path + "/versions/2/" + DataDirectoryLayout.snapshotBlobFile))
        let index = try SearchIndex(path: installed.indexPath)
        #expect(try index.chunk(id: "chunk-005")?.content == RepoFixture.chunks()[5].content)
        #expect(try index.chunk(id: "chunk-000")?.content == "flood maps revision 2")
    }
}
