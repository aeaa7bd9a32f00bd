import CairnTestSupport
import CairnSync
import Foundation
import Testing

/// Channels of one cairnd keep their data directories on one disk (`DIR/channels/<name>`): a
/// real small file system (a tmpfs this test mounts, as root) filled by a real file.
@Suite("Channels sharing a disk", .offCooperativePool, .serialized)
struct SharedDiskTests {
    @Test("Given two channels on one small disk, the first keeping a spare copy of its index, when the second's install lacks free space, then it removes the first channel's spare (which only saves time) and installs; the first channel keeps its version")
    func anotherChannelsSpareMakesRoom() async throws {
        let disk = try Tmpfs(megabytes: 64)
        defer { disk.unmount() }
        let big = try RepoFixture(withModel: false), small = try RepoFixture(withModel: false)
        try big.publish(version: 1, chunks: RepoFixture.chunks(count: 10_000))
        try small.publish(version: 1)
        let first = try Device(repo: big, sources: [big.url], path: disk.path + "/data", spareIndexMinimumBytes: 0)
        #expect(await first.syncer.syncOnce().installedVersion == 1)
        let spare = first.path + "/versions/1/spare.sqlite"
        await first.syncer.spareFinished()
        try #require(FileManager.default.fileExists(atPath: spare), "the first channel keeps a spare")
        let spareBytes = try #require(try FileManager.default.attributesOfItem(atPath: spare)[.size] as? Int)

        let second = try Device(repo: small, sources: [small.url], path: disk.path + "/data/channels/small",
                                otherChannels: [first.path])
        // Less free space than the second channel's install and its 1 MiB margin need, more
        // once the spare is gone.
        disk.fill(leaving: 1 << 20)
        #expect(spareBytes > 2 << 20, "the spare must free more than the install needs: \(spareBytes)")
        let outcome = await second.syncer.syncOnce()
        #expect(outcome.installedVersion == 1, "\(outcome)")
        #expect(!FileManager.default.fileExists(atPath: spare))
        #expect(first.directory.installed()?.version == 1)
        #expect(FileManager.default.fileExists(atPath: first.path + "/versions/1/index.sqlite"))
    }

    @Test("Given a device keeping a spare copy of its index on a small disk, when something else fills the disk under the free-space margin, then the next attempt, finding nothing new, removes the spare and status says declined; the version keeps its files, and with room again the spare stays declined")
    func spareGivenBackWhenTheDiskFills() async throws {
        let disk = try Tmpfs(megabytes: 64)
        defer { disk.unmount() }
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1, chunks: RepoFixture.chunks(count: 10_000))
        let device = try Device(repo: repo, sources: [repo.url], path: disk.path + "/data", spareIndexMinimumBytes: 0)
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        let spare = device.path + "/versions/1/spare.sqlite"
        // The copy's thread ended, not only its file renamed into place: an attempt leaves a
        // copy still running alone.
        await device.syncer.spareFinished()
        try #require(FileManager.default.fileExists(atPath: spare), "the device keeps a spare")
        #expect(device.syncer.spareState(of: device.directory.installed()) == .ready)

        disk.fill(leaving: 512 << 10)  // under the device's 1 MiB margin
        let outcome = await device.syncer.syncOnce()
        #expect(outcome.errorCode == nil, "\(outcome)")
        #expect(!FileManager.default.fileExists(atPath: spare))
        #expect(device.syncer.spareState(of: device.directory.installed()) == .declined)
        #expect(FileManager.default.fileExists(atPath: device.path + "/versions/1/index.sqlite"))
        disk.emptyFiller()
        await device.syncer.syncOnce()
        // With room again, the version's spare stays declined (until cairnd restarts).
        #expect(device.syncer.spareState(of: device.directory.installed()) == .declined)
    }
}
