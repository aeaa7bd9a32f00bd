import CairnCore
import CairnStore
import CairnSync
import CairnTestSupport
import Foundation
import Testing

/// These run CairnTestSupport's Fixtures/fault_server.py: a real TCP server on loopback that produces the faults
/// nginx cannot produce on demand (cut connections, stalls, garbage, 500s) on the real wire.
@Suite("Faulty sources: skipped for the next, resumed, recorded", .offCooperativePool)
struct FaultTests {
    @Test("Given a first source serving corrupt blobs, when syncing, then it is skipped, the second succeeds and health records both")
    func corruptBlobSkipped() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let bad = try FaultServer(root: repo.root, ["--corrupt"])
        defer { bad.stop() }
        let device = try Device(repo: repo, sources: [bad.url, repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        let health = try #require(device.state.sources)
        #expect(health.count == 2)
        #expect(health[0].url == bad.url && health[0].consecutiveFailures == 1)
        #expect(health[0].lastError?.hasPrefix("hash_mismatch") == true)
        #expect(health[1].consecutiveFailures == 0 && health[1].lastOK != nil)
    }

    @Test("Given a connection cut half-way through the snapshot, when syncing again, then the download resumes with Range and moves at most 1.1× the blob")
    func resumeAfterCut() async throws {
        let repo = try RepoFixture(withModel: false)
        let manifest = try repo.publish(version: 1)
        let size = manifest.snapshot.size
        let server = try FaultServer(root: repo.root, ["--cut-after", String(size / 2)])
        defer { server.stop() }
        let device = try Device(repo: repo, sources: [server.url])

        #expect(await device.syncer.syncOnce().errorCode == "network")
        #expect(device.entries("staging") == ["\(manifest.snapshot.sha256.hex).partial"])
        #expect(await device.syncer.syncOnce().installedVersion == 1)

        let blob = server.requests.filter { $0.path == "/" + BlobStore.relativePath(of: manifest.snapshot.sha256) }
        #expect(blob.count == 2)
        #expect(blob.last?.range == "bytes=\(size / 2)-" && blob.last?.status == 206)
        let sent = blob.reduce(0) { $0 + $1.sent }
        #expect(Double(sent) <= 1.1 * Double(size), "sent \(sent) bytes for a \(size)-byte blob")
    }

    @Test("Given a staged partial blob whose bytes are wrong, when syncing, then the resumed blob fails its hash, is downloaded again whole, and installs")
    func resumedBlobWithWrongBytes() async throws {
        let repo = try RepoFixture(withModel: false)
        let manifest = try repo.publish(version: 1)
        let size = manifest.snapshot.size
        let server = try FaultServer(root: repo.root)
        defer { server.stop() }
        let device = try Device(repo: repo, sources: [server.url])
        // Half a blob that another source (or a torn write) got wrong: its first byte differs.
        let path = "/" + BlobStore.relativePath(of: manifest.snapshot.sha256)
        var half = Array(try FileSystem.read(repo.root + path).prefix(size / 2))
        half[0] ^= 0xFF
        try FileManager.default.createDirectory(atPath: device.path + "/staging", withIntermediateDirectories: true)
        try FileSystem.writeAtomically(half, to: device.path + "/staging/\(manifest.snapshot.sha256.hex).partial")

        #expect(await device.syncer.syncOnce().installedVersion == 1)
        let blob = server.requests.filter { $0.path == path }
        #expect(blob.map(\.status) == [206, 200], "\(blob.map { "\($0.range) \($0.status)" })")
        #expect(blob.first?.range == "bytes=\(size / 2)-")
        #expect(device.entries("staging").isEmpty)
    }

    @Test("Given a source that stalls mid-blob, when syncing, then the low-speed limit fires and the next source serves")
    func stallThenNextSource() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let server = try FaultServer(root: repo.root, ["--stall-after", "100"])
        defer { server.stop() }
        let limits = TransferLimits(lowSpeedBytesPerSecond: 1_000, lowSpeedSeconds: 1)
        let device = try Device(repo: repo, sources: [server.url, repo.url], transfer: limits)
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        let health = try #require(device.state.sources?.first)
        #expect(health.lastError?.hasPrefix("network") == true)
    }

    @Test("Given a source answering 500, when syncing, then the attempt fails with http_status, online, and nothing changes")
    func serverError() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let server = try FaultServer(root: repo.root, ["--status", "500"])
        defer { server.stop() }
        let device = try Device(repo: repo, sources: [server.url])
        #expect(await device.syncer.syncOnce().errorCode == "http_status")
        #expect(device.state.lastAttemptReachedSource == true && device.currentTarget == nil)
    }
}
