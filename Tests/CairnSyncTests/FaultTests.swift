import CairnCore
import CairnStore
@testable import CairnSync
import CairnTestSupport
import Foundation
import Testing

/// These run CairnTestSupport's Fixtures/fault_server.py: a real TCP server on loopback that produces the faults
/// nginx cannot produce on demand (cut connections, stalls, garbage, 500s) on the real wire.
@Suite("Faulty sources: skipped for the next, resumed, recorded", .offCooperativePool)
struct FaultTests {
    /// Version 1 published, the fault server started on it with `options`, and a new device
    /// whose only source it is.
    static func sourceOnVersion1(_ options: [String]) throws -> (FaultServer, Device) {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let server = try FaultServer(root: repo.root, options)
        do {
            return (server, try Device(repo: repo, sources: [server.url]))
        } catch {
            server.stop()
            throw error
        }
    }

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

    /// A repository with version 1, and a copy of it as it stands (a USB stick): its `file://` URL.
    static func repositoryAndStick() throws -> (RepoFixture, stick: String) {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let stick = try TemporaryDirectory.make() + "/stick"
        try FileManager.default.copyItem(atPath: repo.root, toPath: stick)
        return (repo, "file://" + stick)
    }

    @Test("Given a first source (a stick left plugged in) with the installed version and a second with a newer one, when syncing, then the newer one installs from the second; with both up to date, the attempt is up to date")
    func staleFirstSourceDoesNotFreeze() async throws {
        let (repo, stick) = try Self.repositoryAndStick()
        let device = try Device(repo: repo, sources: [stick, repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        // Both sources offer version 1: up to date, and both were asked.
        guard case .upToDate(let version) = await device.syncer.syncOnce() else { Issue.record("not up to date"); return }
        #expect(version == 1)
        #expect(device.state.sources?.count == 2 && device.state.sources?.allSatisfy { $0.lastOK != nil } == true)
        try repo.publish(version: 2, deltasFrom: [1])
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        let health = try #require(device.state.sources)
        #expect(health.count == 2 && health.allSatisfy { $0.consecutiveFailures == 0 && $0.lastOK != nil })
        // Now the stick is older than the installed version (refused there as a rollback) and the
        // origin is up to date: the attempt is up to date, not failed.
        guard case .upToDate(let after) = await device.syncer.syncOnce() else { Issue.record("not up to date"); return }
        #expect(after == 2)
        #expect(device.state.sources?.first?.lastError?.hasPrefix("rollback") == true)
    }

    @Test("Given a first source holding another channel's manifest where this channel's goes (a folder copied wrongly) and a second up to date, when syncing, then the attempt is up to date, not failed and backed off from, and the refusal is in that source's health; a stranger's signature stays news")
    func otherChannelsFolderIsNotNews() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let other = try RepoFixture(withModel: false)
        _ = try other.publish(version: 5, signer: repo.key) { $0.channel = "elsewhere" }
        let device = try Device(repo: repo, sources: ["file://" + other.root, repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        let outcome = await device.syncer.syncOnce()
        #expect(outcome.isUpToDate, "\(outcome)")
        #expect(device.state.lastError == nil)
        let stick = try #require(device.state.sources?.first { $0.url.hasPrefix("file://") })
        #expect(stick.lastError?.hasPrefix("channel_mismatch") == true && stick.consecutiveFailures == 2,
                "\(String(describing: stick.lastError))")
        // A newer version signed by a key the device does not trust is news (it could be the
        // origin's own after a rotation the device cannot follow): the attempt says so.
        let stranger = try RepoFixture(withModel: false)
        try stranger.publish(version: 6)
        let signed = try Device(repo: repo, sources: ["file://" + stranger.root, repo.url])
        #expect(await signed.syncer.syncOnce().installedVersion == 1)
        let refused = await signed.syncer.syncOnce()
        #expect(!refused.isUpToDate && refused.errorCode != nil, "\(refused)")
    }

    @Test("Given a TLS failure while the device's clock reads 1970 and the newest time it has seen is 2028 (a dead clock battery), then the message says to set the clock if it is wrong; with the clock within a day of that time, or for a failure other than TLS, it is unchanged (the wall clock cannot be set back in a test: the rule is checked alone)")
    func tlsWithTheClockBehind() {
        var state = SyncState()
        state.clockFloor = "2028-01-01T00:00:00Z"
        let tls = SyncError(.tls, "TLS with the source failed for the manifest: SSL certificate problem: certificate is not yet valid (curl 60); check ca_bundle, client_cert and client_key")
        let hinted = Syncer.withClockHint(tls, state: state, now: Date(timeIntervalSince1970: 0))
        #expect(hinted.code == .tls && hinted.message.hasPrefix(tls.message)
                && hinted.message.hasSuffix("this device's clock (1970-01-01T00:00:00Z) is behind the newest time it has seen (2028-01-01T00:00:00Z), and a clock that is wrong makes a certificate look not yet valid: if it is, set the clock"),
                "\(hinted.message)")
        #expect(Syncer.withClockHint(tls, state: state, now: Date(timeIntervalSince1970: 1_830_297_600 - 43_200)).message == tls.message)
        #expect(Syncer.withClockHint(SyncError(.network, "cut"), state: state, now: Date(timeIntervalSince1970: 0)).message == "cut")
    }

    @Test("Given Content-Range values, when read, then the first and last bytes and the whole length a range answer names are taken, and anything else is none (a server may cap a range answer; its length must match the range it names)")
    func contentRangeBounds() {
        let parts = { (value: Substring) -> [Int64?] in
            let range = TransferContext.contentRange(value)
            return [range.first, range.last, range.length]
        }
        #expect(parts(" bytes 100-199/1000\r\n") == [100, 199, 1000])
        // The whole length alone, also a 416's: what tells a source's copy of another size.
        #expect(parts(" bytes */400\r\n") == [nil, nil, 400])
        #expect(parts(" bytes 100-/1000") == [100, nil, 1000])
        #expect(parts(" bytes 100-199/*") == [100, 199, nil])
        #expect(parts(" bytes 1x0-199/1000") == [nil, 199, 1000])
        #expect(parts(" items 1-2/3") == [nil, nil, nil])
    }

    @Test("Given a first source up to date and a later one offering a newer version that fails (corrupt blobs), when syncing, then the attempt fails with that error, not up to date; a later source out of reach stays no news")
    func laterSourceFailureIsNews() async throws {
        let (repo, stick) = try Self.repositoryAndStick()
        let corrupt = try FaultServer(root: repo.root, ["--corrupt"])
        defer { corrupt.stop() }
        let device = try Device(repo: repo, sources: [stick, corrupt.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2))
        let outcome = await device.syncer.syncOnce()
        #expect(outcome.errorCode == "hash_mismatch", "\(outcome)")
        #expect(device.state.lastError?.code == "hash_mismatch")
        corrupt.stop()
        #expect(await device.syncer.syncOnce().isUpToDate)
    }

    @Test("Given a first source up to date and a later one (a stick) offering a newer version whose blobs are copies cut short, when syncing, then the attempt fails with that error, not up to date, and the later source is tried after the others, as after a hash mismatch")
    func laterSourceCopyCutShortIsNews() async throws {
        let (repo, stick) = try Self.repositoryAndStick()
        let mirror = try TemporaryDirectory.make() + "/mirror"
        let device = try Device(repo: repo, sources: [stick, "file://" + mirror])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        let manifest = try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), deltasFrom: [1])
        try FileManager.default.copyItem(atPath: repo.root, toPath: mirror)
        for id in [manifest.snapshot.sha256] + manifest.deltas.map(\.sha256) {
            #expect(truncate(mirror + "/" + BlobStore.relativePath(of: id), 100) == 0)
        }
        let outcome = await device.syncer.syncOnce()
        #expect(outcome.errorCode == "http_status", "\(outcome)")
        #expect(device.state.source("file://" + mirror)?.lastHashMismatch != nil)
        // Listed first, it would now be asked after the stick.
        #expect(Syncer.order(["file://" + mirror, stick], state: device.state, now: Date()) == [stick, "file://" + mirror])
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

    @Test("Given a first source that trickles the manifest just above the low-speed limit, when syncing, then the manifest's time limit ends that source's turn with network, saying so, and the next source installs")
    func tricklingManifestThenNextSource() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let server = try FaultServer(root: repo.root, [])
        defer { server.stop() }
        try server.set(["small_rate": 200])
        var limits = TransferLimits(lowSpeedBytesPerSecond: 100, lowSpeedSeconds: 30)
        limits.smallFileSeconds = 1
        let manifestBytes = try #require(repo.manifestBytes[1]).count
        #expect(manifestBytes > 400, "the manifest must take over a second at 200 B/s: \(manifestBytes) bytes")
        let device = try Device(repo: repo, sources: [server.url, repo.url], transfer: limits)
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        let health = try #require(device.state.sources?.first)
        #expect(health.lastError?.hasPrefix("network: the manifest did not arrive within 1 s") == true, "\(String(describing: health.lastError))")
    }

    @Test("Given a bandwidth cap, then a manifest's time limit grows so that 256 KiB pass twice over at the cap")
    func smallFileSecondsUnderCap() {
        #expect(TransferLimits().effectiveSmallFileSeconds == 120)
        #expect(TransferLimits(bandwidthCap: 1024).effectiveSmallFileSeconds == 512)
        #expect(TransferLimits(bandwidthCap: 1 << 20).effectiveSmallFileSeconds == 120)
    }

    @Test("Given a source answering 500, when syncing, then the attempt fails with http_status, online, and nothing changes")
    func serverError() async throws {
        let (server, device) = try Self.sourceOnVersion1(["--status", "500"])
        defer { server.stop() }
        #expect(await device.syncer.syncOnce().errorCode == "http_status")
        #expect(device.state.lastAttemptReachedSource == true && device.currentTarget == nil)
    }

    @Test("Given a source answering 500 with an endless error page, when syncing, then the attempt fails with http_status having read at most about 64 KiB of the page")
    func endlessErrorPage() async throws {
        let page = 64 << 20
        let (server, device) = try Self.sourceOnVersion1(["--status", "500", "--error-body", "\(page)"])
        defer { server.stop() }
        #expect(await device.syncer.syncOnce().errorCode == "http_status")
        #expect(device.state.lastError?.message.contains("HTTP 500") == true)
        // What the link paid: the discarded page is cut after 64 KiB (libcurl reads up to 16 KiB
        // past it), not read to its 64 MiB end.
        let received = await device.syncer.lastAttemptStats.bodyBytes
        #expect(received < 256 << 10, "\(received) bytes of the error page read")
        #expect(eventually { server.requests.contains { $0.status == 500 && $0.sent < page } }, "\(server.requests)")
    }

    @Test("Given a source answering 304 to a manifest request that sent no ETag, when a new device syncs, then the attempt fails with http_status instead of finding itself up to date")
    func notModifiedWithoutETag() async throws {
        let (server, device) = try Self.sourceOnVersion1(["--status", "304"])
        defer { server.stop() }
        #expect(await device.syncer.syncOnce().errorCode == "http_status")
        #expect(device.state.lastError?.message.contains("304") == true && device.currentTarget == nil)
        try server.clear()
        #expect(await device.syncer.syncOnce().installedVersion == 1)
    }

    @Test("Given a source answering a blob request with 206 for bytes other than those asked for, when syncing, then the attempt fails with http_status naming both offsets and nothing is installed")
    func misplacedPartialContent() async throws {
        let (server, device) = try Self.sourceOnVersion1([])
        defer { server.stop() }
        try server.set(["shift_range": 10])
        #expect(await device.syncer.syncOnce().errorCode == "http_status")
        #expect(device.state.lastError?.message.contains("206 with bytes from 10") == true, "\(String(describing: device.state.lastError))")
        #expect(device.currentTarget == nil)
        try server.clear()
        #expect(await device.syncer.syncOnce().installedVersion == 1)
    }

    @Test("Given a bandwidth cap below the low-speed limit, then transfers run under a low-speed limit of half the cap; without a cap, or above it, the limit is unchanged")
    func lowSpeedUnderCap() {
        #expect(TransferLimits(lowSpeedBytesPerSecond: 1024, bandwidthCap: 600).effectiveLowSpeed == 300)
        #expect(TransferLimits(lowSpeedBytesPerSecond: 1024, bandwidthCap: 1).effectiveLowSpeed == 1)
        #expect(TransferLimits(lowSpeedBytesPerSecond: 1024).effectiveLowSpeed == 1024)
        #expect(TransferLimits(lowSpeedBytesPerSecond: 1024, bandwidthCap: 1 << 20).effectiveLowSpeed == 1024)
    }

    @Test("Given a bandwidth cap below slow_source_rate, then a source is handed over only below half the cap (a capped link would leave every source but the last); 0 turns it off")
    func slowSourceRateUnderCap() {
        #expect(TransferLimits().effectiveSlowSourceRate == 16384)
        #expect(TransferLimits(bandwidthCap: 8192).effectiveSlowSourceRate == 4096)
        #expect(TransferLimits(bandwidthCap: 1 << 20).effectiveSlowSourceRate == 16384)
        var off = TransferLimits(bandwidthCap: 8192)
        off.slowSourceBytesPerSecond = 0
        #expect(off.effectiveSlowSourceRate == nil)
    }

    @Test("Given a file:// source whose manifest, then whose snapshot blob, is a FIFO (a stick made by someone else), when syncing, then each attempt fails at once with io saying the file is not a regular file, instead of waiting for a writer for ever; replaced by the real file, it installs",
          .timeLimit(.minutes(1)))
    func fifoOnStick() async throws {
        let repo = try RepoFixture(withModel: false)
        let manifest = try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url])
        let manifestPath = "\(repo.root)/channels/\(repo.channel)/manifest.json"
        let blobPath = repo.root + "/" + BlobStore.relativePath(of: manifest.snapshot.sha256)
        for (path, what) in [(manifestPath, "manifest"), (blobPath, "blob")] {
            let real = try FileSystem.read(path)
            unlink(path)
            #expect(mkfifo(path, 0o644) == 0)
            #expect(await device.syncer.syncOnce().errorCode == "io")
            #expect(device.state.lastError?.message.contains("the \(what) \(path) is not a regular file") == true,
                    "\(String(describing: device.state.lastError))")
            unlink(path)
            try FileSystem.writeAtomically(real, to: path)
        }
        #expect(await device.syncer.syncOnce().installedVersion == 1)
    }
}
