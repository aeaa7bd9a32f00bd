import CairnTestSupport
import CairnCore
import CairnIndex
import CairnStore
import CairnSync
import Foundation
import Testing

/// A full install trusts the signed SHA-256 of the snapshot's bytes for SQLite's structure and
/// the FTS index (the publisher checks both before it signs), and still recomputes every row's
/// hashes and the state root on the device (protocol/snapshot.md, "Verification"): these tests
/// show what that refuses even when the publisher's key signed it.
@Suite("What a full install still refuses")
struct FullTrustTests {
    /// Publishes version 2 with its snapshot's rows changed by `sql` after the state root was
    /// computed, the changed file compressed and named in the signed manifest.
    static func publishAltered(_ repo: RepoFixture, sql: String) throws {
        let genuine = try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), current: false)
        let file = try TemporaryDirectory.make() + "/index.sqlite"
        try Zlib.decompress(try FileSystem.read(repo.blobs.path(of: genuine.snapshot.sha256)), toNewFile: file,
                            size: genuine.snapshot.uncompressedSize)
        try Database(path: file, mode: .readWrite).exec(sql)
        let raw = try FileSystem.read(file)
        let compressed = try Zlib.compress(raw)
        let id = try repo.blobs.put(compressed)
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2)) {
            $0.snapshot = Manifest.Snapshot(sha256: id, size: compressed.count, uncompressedSize: raw.count)
        }
    }

    @Test("Given a signed snapshot in which a row's text differs from its stored hash, when installed, then it is refused and version 1 keeps serving")
    func rowTextNotItsHash() async throws {
        let (repo, device) = try await DeltaTrustTests.deviceOnVersion1()
        try Self.publishAltered(repo, sql: "UPDATE chunks SET content = 'drink the flood water' WHERE id = 'chunk-003'")

        let outcome = await device.syncer.syncOnce()
        #expect(outcome.errorCode == "install_failed")
        #expect(device.currentTarget == "versions/1" && device.entries("versions") == ["1"])
        let installed = try #require(device.directory.installed())
        #expect(try SearchIndex(path: installed.indexPath).chunk(id: "chunk-003")?.content == RepoFixture.chunks()[3].content)
    }

    @Test("Given a signed snapshot whose row text and stored hash were both changed, when installed, then state_root_mismatch and version 1 keeps serving")
    func rowAndHashChanged() async throws {
        let (repo, device) = try await DeltaTrustTests.deviceOnVersion1()
        let text = "drink the flood water"
        try Self.publishAltered(repo, sql: """
            UPDATE chunks SET content = '\(text)', content_hash = '\(ContentID(hashing: Array(text.utf8)).hex)' WHERE id = 'chunk-003'
            """)

        #expect(await device.syncer.syncOnce().errorCode == "state_root_mismatch")
        #expect(device.currentTarget == "versions/1" && device.entries("versions") == ["1"])
    }
}
