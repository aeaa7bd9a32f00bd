import CairnTestSupport
import CairnCore
import CairnIndex
import CairnStore
import CairnSync
import Foundation
import Testing

/// The spare copy a full install leaves for the next delta (protocol/data-directory.md,
/// "Spare"): that delta moves it and applies in place instead of copying the live index.
@Suite("A spare copy of the index after a full install", .offCooperativePool)
struct SpareIndexTests {
    static func spare(_ device: Device, _ version: Int) -> String {
        device.path + "/versions/\(version)/" + DataDirectoryLayout.spareIndexFile
    }

    /// A repository at version 1 and a device that installed it in full and keeps a spare of
    /// any size, its copy finished.
    static func installedWithSpare() async throws -> (RepoFixture, Device) {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1, chunks: InPlaceDeltaTests.chunks(version: 1))
        let device = try Device(repo: repo, sources: [repo.url], spareIndexMinimumBytes: 0)
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        await device.syncer.spareFinished()
        return (repo, device)
    }

    /// A data directory at `path` that installed `versions` in full, one after the other,
    /// keeping a spare copy of the last one's index (its copy finished).
    static func installedInFull(_ versions: [Int], repo: RepoFixture, path: String) async throws {
        let device = try Device(repo: repo, sources: [repo.url], path: path, spareIndexMinimumBytes: 0)
        for version in versions {
            try repo.publish(version: version, chunks: InPlaceDeltaTests.chunks(version: version))
            #expect(await device.syncer.syncOnce().installedVersion == version)
        }
        await device.syncer.spareFinished()
        #expect(FileSystem.exists(Self.spare(device, versions.last!)))
    }

    /// A `max_disk_bytes` for the data directory at `path` with room to install `manifest` in
    /// full once the spare of `installed` is gone, not with it; and the spare's size.
    static func budgetWithoutSpare(of installed: Int, for manifest: Manifest, repo: RepoFixture,
                                   path: String) throws -> (budget: Int64, spare: Int64) {
        let probe = try Device(repo: repo, sources: [repo.url], path: path)
        let spare = Int64(try #require(FileManager.default.attributesOfItem(atPath: Self.spare(probe, installed))[.size] as? Int))
        let needed = SyncPlanner.requiredBytes(path: .full(manifest.snapshot), alreadyStaged: 0, currentIndexSize: 0,
                                               rowsBytes: SyncPlanner.rowsBytes(path: .full(manifest.snapshot), chunks: manifest.chunkCount,
                                                                                dimension: manifest.dimension),
                                               missingModelBytes: 0, margin: 0)
        return (probe.directory.contentBytes() + needed - spare / 2, spare)
    }

    @Test("Given a full install that kept a spare, when a delta arrives, then it is built on the spare in place, the live file is never written, and rollback finds the old version whole")
    func deltaOnTheSpare() async throws {
        let (repo, device) = try await Self.installedWithSpare()
        let live = device.path + "/versions/1/index.sqlite"
        let spare = Self.spare(device, 1)
        #expect(FileManager.default.contentsEqual(atPath: spare, andPath: live))
        #expect(device.entries("staging").isEmpty)
        #expect(device.syncer.spareState(of: device.directory.installed()) == .ready)
        let (spareFile, liveFile) = (try #require(InPlaceDeltaTests.inode(spare)), try #require(InPlaceDeltaTests.inode(live)))

        let v2 = try repo.publish(version: 2, chunks: InPlaceDeltaTests.chunks(version: 2), deltasFrom: [1])
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        #expect(await device.syncer.lastInstallPath == "delta")
        // The spare became version 2's file; version 1's was never written.
        #expect(InPlaceDeltaTests.inode(device.path + "/versions/2/index.sqlite") == spareFile)
        #expect(!FileSystem.exists(spare))
        #expect(InPlaceDeltaTests.inode(live) == liveFile)
        #expect(try Snapshot.verify(at: live).version == 1)
        let installed = try #require(device.directory.installed())
        #expect(try Snapshot.verify(at: installed.indexPath, expectedStateRoot: v2.stateRoot).version == 2)
        let index = try SearchIndex(path: installed.indexPath)
        #expect(index.count == InPlaceDeltaTests.chunks(version: 2).count)
        for chunk in InPlaceDeltaTests.chunks(version: 2) { #expect(try index.chunk(id: chunk.id) == chunk) }
        // A delta keeps no spare: the next one reuses version 1's file.
        await device.syncer.spareFinished()
        #expect(!FileSystem.exists(Self.spare(device, 2)))
        #expect(device.syncer.spareState(of: device.directory.installed()) == nil)
        #expect(try await device.syncer.rollback().version.version == 1)
    }

    @Test("Given a spare of version 1, when version 2 installs in full, then version 1's spare is removed and version 2 keeps its own")
    func spareFollowsTheCurrentVersion() async throws {
        let (repo, device) = try await Self.installedWithSpare()
        #expect(FileSystem.exists(Self.spare(device, 1)))

        try repo.publish(version: 2, chunks: InPlaceDeltaTests.chunks(version: 2))
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        await device.syncer.spareFinished()
        #expect(device.previousTarget == "versions/1")
        #expect(!FileSystem.exists(Self.spare(device, 1)))
        #expect(FileSystem.exists(Self.spare(device, 2)))
    }

    /// A data directory that installed version 1 in full with its spare, and version 2
    /// published, whose full snapshot fits the returned budget only once the spare is gone.
    static func snapshotFittingOnlyWithoutSpare() async throws -> (RepoFixture, path: String, v2: Manifest, budget: Int64) {
        let repo = try RepoFixture(withModel: false)
        let path = try TemporaryDirectory.make()
        try await installedInFull([1], repo: repo, path: path)
        let v2 = try repo.publish(version: 2, chunks: InPlaceDeltaTests.chunks(version: 2))
        return (repo, path, v2, try budgetWithoutSpare(of: 1, for: v2, repo: repo, path: path).budget)
    }

    @Test("Given a spare, when a full snapshot fits max_disk_bytes only without it, then the spare is removed and the version installs")
    func spareMakesRoomFirst() async throws {
        let (repo, path, _, budget) = try await Self.snapshotFittingOnlyWithoutSpare()
        let device = try Device(repo: repo, sources: [repo.url], path: path, spareIndexMinimumBytes: 0, maxDiskBytes: budget)
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        #expect(device.previousTarget == "versions/1")
        #expect(!FileSystem.exists(Self.spare(device, 1)))
    }

    @Test("Given a spare removed to make room for a full snapshot, when the snapshot then fails its hash, then the spare is not copied again after the attempt (status: declined), so the next attempt does not remove a fresh copy")
    func spareNotCopiedAgainAfterAFailedSnapshot() async throws {
        let (repo, path, v2, budget) = try await Self.snapshotFittingOnlyWithoutSpare()
        let blob = repo.root + "/blobs/sha256/" + String(v2.snapshot.sha256.hex.prefix(2)) + "/" + v2.snapshot.sha256.hex
        var bytes = try Data(contentsOf: URL(fileURLWithPath: blob))
        bytes[bytes.count / 2] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: blob))
        let device = try Device(repo: repo, sources: [repo.url], path: path, spareIndexMinimumBytes: 0, maxDiskBytes: budget)
        #expect(await device.syncer.syncOnce().errorCode == "hash_mismatch")
        await device.syncer.spareFinished()
        #expect(!FileSystem.exists(Self.spare(device, 1)))
        #expect(device.syncer.spareState(of: device.directory.installed()) == .declined)
    }

    @Test("Given a spare and a previous version, when a full snapshot fits max_disk_bytes once either is gone, then the spare goes and the previous version is kept for rollback")
    func spareGoesBeforeThePrevious() async throws {
        let repo = try RepoFixture(withModel: false)
        let path = try TemporaryDirectory.make()
        try await Self.installedInFull([1, 2], repo: repo, path: path)
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: path + "/previous")) == "versions/1")
        let v3 = try repo.publish(version: 3, chunks: InPlaceDeltaTests.chunks(version: 1))
        let (budget, spare) = try Self.budgetWithoutSpare(of: 2, for: v3, repo: repo, path: path)
        // Removing either the spare or version 1 makes room; the spare must be the one to go.
        try #require(DiskUsage.bytes(under: path + "/versions/1") > spare / 2)
        let device = try Device(repo: repo, sources: [repo.url], path: path, spareIndexMinimumBytes: 0, maxDiskBytes: budget)
        #expect(await device.syncer.syncOnce().installedVersion == 3)
        #expect(device.directory.readState().previousDropped == nil, "version 1 was removed to make room before the spare")
        #expect(!FileSystem.exists(Self.spare(device, 2)))
        #expect(device.previousTarget == "versions/2")
    }

    @Test("Given a full-installed version whose spare is missing (a copy cut short), when the next attempt finds nothing new, then the spare is made")
    func spareMadeAfterALaterAttempt() async throws {
        let (_, device) = try await Self.installedWithSpare()
        #expect(unlink(Self.spare(device, 1)) == 0)
        #expect(await device.syncer.syncOnce().isUpToDate)
        await device.syncer.spareFinished()
        #expect(FileManager.default.contentsEqual(atPath: Self.spare(device, 1), andPath: device.path + "/versions/1/index.sqlite"))
    }

    @Test("Given max_disk_bytes with no room for a copy of the index, when a version installs in full, then no spare is kept")
    func noSpareBeyondTheBudget() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1, chunks: InPlaceDeltaTests.chunks(version: 1))
        // Measured on a device that keeps no spare, so that no copy runs while it is measured.
        let v1 = try Device(repo: repo, sources: [repo.url], spareIndexMinimumBytes: nil)
        #expect(await v1.syncer.syncOnce().installedVersion == 1)
        let used = v1.directory.contentBytes()
        let index = Int64(try #require(FileManager.default.attributesOfItem(atPath: v1.path + "/versions/1/index.sqlite")[.size] as? Int))
        // Room for version 1 as installed, not for a second copy of its index.
        let device = try Device(repo: repo, sources: [repo.url], spareIndexMinimumBytes: 0, maxDiskBytes: used + index / 2)
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        await device.syncer.spareFinished()
        #expect(!FileSystem.exists(Self.spare(device, 1)))
        #expect(device.syncer.spareState(of: device.directory.installed()) == .declined)
        #expect(device.directory.contentBytes() <= used + index / 2)
    }

    @Test("Given an index below spare_index_min_bytes, when it installs in full, then no spare is kept and the next delta copies the live index")
    func noSpareBelowTheMinimum() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1, chunks: InPlaceDeltaTests.chunks(version: 1))
        let device = try Device(repo: repo, sources: [repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        await device.syncer.spareFinished()
        #expect(!FileSystem.exists(Self.spare(device, 1)))
        #expect(device.syncer.spareState(of: device.directory.installed()) == nil)
        let live = try #require(InPlaceDeltaTests.inode(device.path + "/versions/1/index.sqlite"))
        try repo.publish(version: 2, chunks: InPlaceDeltaTests.chunks(version: 2), deltasFrom: [1])
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        let built = try #require(InPlaceDeltaTests.inode(device.path + "/versions/2/index.sqlite"))
        #expect(await device.syncer.lastInstallPath == "delta" && built != live)
        #expect(try Snapshot.verify(at: device.path + "/versions/1/index.sqlite").version == 1)
    }

    @Test("Given a spare being written, when status is read, then it says copying, and ready once the copy is renamed")
    func statusWhileCopying() async throws {
        let (_, device) = try await Self.installedWithSpare()
        // The copy's own partial file, as its thread leaves it mid-copy (a real copy of a test
        // index ends before status could be read): status goes by the files, not by the actor.
        let partial = device.path + "/staging/spare-1.partial"
        #expect(rename(Self.spare(device, 1), partial) == 0)
        #expect(device.syncer.spareState(of: device.directory.installed()) == .copying)
        #expect(rename(partial, Self.spare(device, 1)) == 0)
        #expect(device.syncer.spareState(of: device.directory.installed()) == .ready)
    }

    @Test("Given a spare copy's partial file left by a crash, when the device starts, then it is removed")
    func partialRemovedAtStartUp() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1, chunks: InPlaceDeltaTests.chunks(version: 1))
        let path: String
        do {
            let device = try Device(repo: repo, sources: [repo.url])
            #expect(await device.syncer.syncOnce().installedVersion == 1)
            path = device.path
        }
        let partial = path + "/staging/spare-1.partial"
        try FileSystem.writeNew(Array(repeating: 7, count: 4096), to: partial)
        let restarted = try Device(repo: repo, sources: [repo.url], path: path)
        #expect(!FileSystem.exists(partial))
        #expect(restarted.directory.installed()?.version == 1)
    }
}
