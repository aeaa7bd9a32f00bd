import CairnTestSupport
import CairnCore
import CairnIndex
import CairnStore
import CairnSync
import Foundation
import Testing

/// A delta applied to the previous version's index file in place (protocol/snapshot.md,
/// "Applying a delta"; data-directory.md, "Reusing the previous version's file").
@Suite("Delta installs on the previous version's file", .offCooperativePool)
struct InPlaceDeltaTests {
    /// Version 2: chunk 0 revised, chunk 7 deleted, a new chunk; version 3: chunk 0 revised
    /// again, chunk 7 back, chunk 10 deleted, chunk 5 with other tags and no scenario.
    static func chunks(version: Int) -> [Chunk] {
        var chunks = RepoFixture.chunks(revision: version)
        guard version > 1 else { return chunks }
        chunks.append(Chunk(id: "chunk-100", title: "New guide", content: "storm shelter map drink", scenario: "storm", tags: ["new"]))
        chunks.removeAll { $0.id == (version == 2 ? "chunk-007" : "chunk-010") }
        if version == 3 {
            chunks[5].tags = ["t9", "revised"]
            chunks[5].scenario = nil
        }
        return chunks
    }

    /// A device that installed version 1 in full and version 2 by a delta (which it keeps),
    /// with version 3 published with a delta from 2.
    static func deviceOnVersion2(withModel: Bool, deltasWithSetHash: Bool = true) async throws -> (RepoFixture, Device, Manifest) {
        let repo = try RepoFixture(withModel: withModel)
        repo.deltasWithSetHash = deltasWithSetHash
        try repo.publish(version: 1, chunks: chunks(version: 1))
        let device = try Device(repo: repo, sources: [repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        try repo.publish(version: 2, chunks: chunks(version: 2), deltasFrom: [1])
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        #expect(FileSystem.exists(device.path + "/versions/2/" + DataDirectoryLayout.deltaBlobFile))
        #expect(device.previousTarget == "versions/1")
        let v3 = try repo.publish(version: 3, chunks: chunks(version: 3), deltasFrom: [2])
        return (repo, device, v3)
    }

    /// Drops version 1's index (the previous version's) from the page cache, cold enough that a
    /// delta reads the rows it touches ahead (`SnapshotWriter.prefetch`); returns its inode.
    static func dropPrevious(_ device: Device) throws -> UInt64 {
        let previous = device.path + "/versions/1/index.sqlite"
        let file = try #require(inode(previous))
        try #require(PageCache.drop(previous))
        #expect(SnapshotWriter.cachedShare(of: previous) < 0.9)
        return file
    }

    static func inode(_ path: String) -> UInt64? {
        var info = stat()
        return stat(path, &info) == 0 ? UInt64(info.st_ino) : nil
    }

    /// The installed version 3 verifies whole (SQLite, FTS index, every hash, state root) and
    /// holds exactly version 3's chunks.
    static func expectVersion3(_ device: Device, _ manifest: Manifest) throws {
        let installed = try #require(device.directory.installed())
        #expect(installed.version == 3 && device.previousTarget == "versions/2")
        #expect(try Snapshot.verify(at: installed.indexPath, expectedStateRoot: manifest.stateRoot).version == 3)
        let index = try SearchIndex(path: installed.indexPath)
        #expect(index.count == chunks(version: 3).count)
        for chunk in chunks(version: 3) { #expect(try index.chunk(id: chunk.id) == chunk) }
        #expect(try index.chunk(id: "chunk-010") == nil)
        #expect(device.entries("versions") == ["2", "3"])
    }

    @Test("Given versions 1 → 2 → 3 each by a delta, when 3 arrives, then it is built on version 1's file in place and verifies whole", arguments: [false, true])
    func builtInPlace(withModel: Bool) async throws {
        let (_, device, v3) = try await Self.deviceOnVersion2(withModel: withModel)
        let previousFile = try #require(Self.inode(device.path + "/versions/1/index.sqlite"))
        let liveFile = try #require(Self.inode(device.path + "/versions/2/index.sqlite"))

        #expect(await device.syncer.syncOnce().installedVersion == 3)
        try Self.expectVersion3(device, v3)
        #expect(Self.inode(device.path + "/versions/3/index.sqlite") == previousFile)
        // The live version's file was never written: it is still version 2, now `previous`.
        #expect(Self.inode(device.path + "/versions/2/index.sqlite") == liveFile)
        #expect(try Snapshot.verify(at: device.path + "/versions/2/index.sqlite").version == 2)
        #expect(FileSystem.exists(device.path + "/versions/3/" + DataDirectoryLayout.deltaBlobFile))
        #expect(!FileSystem.exists(device.path + "/versions/3/" + DataDirectoryLayout.snapshotBlobFile))
        // A rollback still finds version 2 whole.
        #expect(try await device.syncer.rollback().version.version == 2)
    }

    @Test("Given deltas with the target's set hash (format 2), when versions 2 and 3 arrive, then each is checked by the set hash derived from the installed rows', with no pass over them, and version 3 verifies whole")
    func checkedBySetHash() async throws {
        let (_, device, v3) = try await Self.deviceOnVersion2(withModel: false)
        // Version 2's delta was checked from version 1's set hash, which its full install's
        // verifying pass computed; version 3's from the set hash that check derived.
        #expect(await device.syncer.lastDeltaCheck == "set_hash")
        #expect(await device.syncer.syncOnce().installedVersion == 3)
        #expect(await device.syncer.lastDeltaCheck == "set_hash")
        try Self.expectVersion3(device, v3)
    }

    @Test("Given deltas without a set hash (format 1, as older publishers write them), when version 3 arrives, then it is checked by the state root over the installed rows and verifies whole")
    func checkedByStateRoot() async throws {
        let (_, device, v3) = try await Self.deviceOnVersion2(withModel: false, deltasWithSetHash: false)
        #expect(await device.syncer.syncOnce().installedVersion == 3)
        #expect(await device.syncer.lastDeltaCheck == "state_root")
        try Self.expectVersion3(device, v3)
    }

    @Test("Given the previous version's file out of the page cache, when version 3 arrives, then its rows are read ahead and version 3 is built on that file in place and verifies whole")
    func builtInPlaceOnAColdFile() async throws {
        let (_, device, v3) = try await Self.deviceOnVersion2(withModel: false)
        let previousFile = try Self.dropPrevious(device)

        #expect(await device.syncer.syncOnce().installedVersion == 3)
        try Self.expectVersion3(device, v3)
        #expect(Self.inode(device.path + "/versions/3/index.sqlite") == previousFile)
    }

    @Test("Given the new delta gone from the source while the kept delta's rows are read ahead, when version 3 arrives, then the full snapshot installs beside it, not on the previous version's file, and nothing of the delta path is left")
    func deltaDownloadFailsDuringReadAhead() async throws {
        let (repo, device, v3) = try await Self.deviceOnVersion2(withModel: false)
        // Cold, so that the kept delta's rows are read ahead from the start of the attempt.
        let previousFile = try Self.dropPrevious(device)
        let delta = try #require(v3.deltas.first { $0.fromVersion == 2 })
        try #require(unlink(repo.blobs.path(of: delta.sha256)) == 0)

        #expect(await device.syncer.syncOnce().installedVersion == 3)
        try Self.expectVersion3(device, v3)
        #expect(Self.inode(device.path + "/versions/3/index.sqlite") != previousFile)
        #expect(FileSystem.exists(device.path + "/versions/3/" + DataDirectoryLayout.snapshotBlobFile))
        // Nothing of the attempt's delta path is left beside the new index.
        #expect(device.entries("versions/3").allSatisfy { !$0.contains("delta") })
    }

    @Test("Given a device restarted without its installed rows in memory, when two deltas arrive, then the first goes on a copy and keeps the rows it loads, so the second goes in place")
    func restartedWithoutRows() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1, chunks: Self.chunks(version: 1))
        let path = try await { () async throws -> String in
            let first = try Device(repo: repo, sources: [repo.url])
            #expect(await first.syncer.syncOnce().installedVersion == 1)
            return first.path
        }()
        // A new syncer on the same directory holds no rows (as after a restart or a rollback).
        let device = try Device(repo: repo, sources: [repo.url], path: path)
        let versionOneFile = try #require(Self.inode(path + "/versions/1/index.sqlite"))
        try repo.publish(version: 2, chunks: Self.chunks(version: 2), deltasFrom: [1])
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        #expect(Self.inode(path + "/versions/2/index.sqlite") != versionOneFile)
        let v3 = try repo.publish(version: 3, chunks: Self.chunks(version: 3), deltasFrom: [2])

        #expect(await device.syncer.syncOnce().installedVersion == 3)
        try Self.expectVersion3(device, v3)
        #expect(Self.inode(path + "/versions/3/index.sqlite") == versionOneFile)
    }

    @Test("Given the previous version's file still open for queries, when a delta arrives, then the live index is copied and the open file stays as it was")
    func previousStillOpen() async throws {
        let (_, device, v3) = try await Self.deviceOnVersion2(withModel: false)
        let previousPath = device.path + "/versions/1/index.sqlite"
        let previousFile = try #require(Self.inode(previousPath))
        let reader = try SearchIndex(path: previousPath)

        #expect(await device.syncer.syncOnce().installedVersion == 3)
        try Self.expectVersion3(device, v3)
        #expect(Self.inode(device.path + "/versions/3/index.sqlite") != previousFile)
        // The old reader still answers from version 1's unchanged rows.
        #expect(try reader.chunk(id: "chunk-000")?.content == "flood maps revision 1")
        #expect(try reader.chunk(id: "chunk-007") != nil && reader.chunk(id: "chunk-100") == nil)
    }

    @Test("Given the kept delta blob damaged, when the next delta arrives, then the live index is copied and the version installs")
    func damagedKeptDelta() async throws {
        let (_, device, v3) = try await Self.deviceOnVersion2(withModel: false)
        let kept = device.path + "/versions/2/" + DataDirectoryLayout.deltaBlobFile
        var bytes = try FileSystem.read(kept)
        bytes[bytes.count / 2] ^= 0x40
        try FileSystem.writeAtomically(bytes, to: kept)
        let previousFile = try #require(Self.inode(device.path + "/versions/1/index.sqlite"))

        #expect(await device.syncer.syncOnce().installedVersion == 3)
        try Self.expectVersion3(device, v3)
        #expect(Self.inode(device.path + "/versions/3/index.sqlite") != previousFile)
    }

    @Test("Given a tampered delta and a device holding its installed rows, then it is refused before any file is touched and both kept versions stay")
    func tamperedRefusedInMemory() async throws {
        let (repo, device, v3) = try await Self.deviceOnVersion2(withModel: false)
        // Version 3's delta blob replaced by a delta whose upsert differs from the signed root.
        let (ref, _) = try repo.tamperedDelta(from: 2, to: 3, content: "drink the flood water")
        try repo.publish(version: 3, chunks: Self.chunks(version: 3)) { $0.deltas = [ref] }
        let snapshotPath = repo.blobs.path(of: v3.snapshot.sha256)
        unlink(snapshotPath)

        let refused = await device.syncer.syncOnce()
        #expect(refused.installedVersion == nil && refused.errorCode != nil)
        #expect(device.currentTarget == "versions/2" && device.previousTarget == "versions/1")
        #expect(try Snapshot.verify(at: device.path + "/versions/1/index.sqlite").version == 1)
        #expect(try Snapshot.verify(at: device.path + "/versions/2/index.sqlite").version == 2)
    }
}
