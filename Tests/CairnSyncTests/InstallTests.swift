import CairnTestSupport
import CairnCore
import CairnIndex
import CairnStore
import CairnSync
import Foundation
import Synchronization
import Testing

@Suite("Installing versions over real HTTP (nginx) and file://", .offCooperativePool)
struct InstallTests {
    static let canaries = [Canary(query: "flood maps", expect: ["chunk-000"], k: 3, mode: "lexical"),
                           Canary(query: "flood maps", expect: ["chunk-000"], k: 40, mode: "hybrid")]

    @Test("Given a repository on nginx, when the device syncs, then it installs, verifies and points current at the version")
    func fullInstallOverHTTP() async throws {
        let repo = try RepoFixture()
        let manifest = try repo.publish(version: 1, canaries: Self.canaries)
        let nginx = try Nginx(root: repo.root)
        defer { nginx.stop() }
        let device = try Device(repo: repo, sources: [nginx.url])

        let outcome = await device.syncer.syncOnce()
        #expect(outcome.installedVersion == 1)
        #expect(device.currentTarget == "versions/1")
        let installed = try #require(device.directory.installed())
        #expect(try Snapshot.verify(at: installed.indexPath, expectedStateRoot: manifest.stateRoot).version == 1)
        #expect(try FileSystem.read(installed.manifestPath) == repo.manifestBytes[1]!)
        #expect(installed.modelDirectory != nil)
        #expect(device.state.installedVersion == 1 && device.state.lastError == nil)
        #expect(device.entries("staging").isEmpty)
        #expect(await nginx.logged { $0.hasPrefix("/blobs/") && $0.contains(" 200 ") })
    }

    @Test("Given a repository on a USB stick (file://), when the device syncs, then it installs the version")
    func fileSource() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 3, canaries: [Self.canaries[1]])
        let device = try Device(repo: repo, sources: [repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 3)
        let installed = try #require(device.directory.installed())
        #expect(installed.modelDirectory == nil)
        #expect(try SearchIndex(path: installed.indexPath).count == 40)
    }

    @Test("Given a snapshot below direct_install_min_bytes, when it installs in full, then its index is left in the page cache; given direct_install_min_bytes 0, then the index is written and checked around the cache; both serve every row",
          .enabled(if: PageCache.dropsPages, "the temporary folder keeps every page cached (tmpfs)"))
    func pageCacheFollowsTheIndexSize() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1, chunks: RepoFixture.chunks(count: 20_000))
        var cachedShare: [Double] = []
        for minimum: Int64 in [64 << 20, 0] {
            let device = try Device(repo: repo, sources: [repo.url], directInstallMinimumBytes: minimum)
            #expect(await device.syncer.syncOnce().installedVersion == 1)
            let index = try #require(device.directory.installed()).indexPath
            let size = try #require(try FileManager.default.attributesOfItem(atPath: index)[.size] as? Int)
            let page = Int(sysconf(Int32(_SC_PAGESIZE)))
            let pages = (size + page - 1) / page
            let resident = try #require(PageCache.residentPages(index))
            cachedShare.append(Double(resident.count) / Double(max(1, pages)))
            #expect(try SearchIndex(path: index).count == 20_000)
        }
        // All of it alone; a cold clone's parallel suite once left 0.88 (pages of the file
        // reclaimed while hundreds of other tests ran). Either is far from the < 0.5 below.
        #expect(cachedShare[0] > 0.75, "\(cachedShare[0]) of the small index cached after its install")
        // The reads outside the check's direct runs (each statement's way down its B-trees) go
        // through the cache, and the kernel reads ahead around them: at 20,000 rows a quarter
        // of this 8 MB file, a fixed few megabytes that a gigabyte index does not notice.
        #expect(cachedShare[1] < 0.5, "\(cachedShare[1]) of the index cached after an install around the cache")
    }

    @Test("Given a version with a model, when it installs, then onModel names the model's folder before the version is in place, so the daemon can load the model meanwhile")
    func modelNamedBeforeTheSwap() async throws {
        let repo = try RepoFixture()
        try repo.publish(version: 1)
        let seen = Mutex<[(folder: String, versionInPlace: Bool)]>([])
        let path = try TemporaryDirectory.make()
        let device = try Device(repo: repo, sources: [repo.url], path: path, onModel: { folder in
            seen.withLock { $0.append((folder, FileSystem.exists(path + "/versions/1"))) }
        })
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        let installed = try #require(device.directory.installed())
        let calls = seen.withLock { $0 }
        #expect(calls.count == 1)
        // The version's model link leads to the folder named.
        let model = try #require(installed.modelDirectory)
        #expect(calls.first.map { URL(fileURLWithPath: $0.folder).resolvingSymlinksInPath().path }
                == URL(fileURLWithPath: model).resolvingSymlinksInPath().path)
        #expect(calls.first?.versionInPlace == false)
    }

    @Test("Given version 1 installed and a small delta 1→2, when syncing, then the delta is fetched, not the snapshot, and the state root verifies")
    func deltaPreferred() async throws {
        let repo = try RepoFixture()
        try repo.publish(version: 1)
        let nginx = try Nginx(root: repo.root)
        defer { nginx.stop() }
        let device = try Device(repo: repo, sources: [nginx.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)

        let v2 = try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), deltasFrom: [1], canaries: Self.canaries)
        let delta = try #require(v2.deltas.first)
        #expect(delta.size < v2.snapshot.size)
        let before = nginx.accessLog.count
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        // The manifest and the delta.
        let requests = await nginx.accessLog(after: before, atLeast: 2)
        #expect(requests.contains { $0.hasPrefix("/" + BlobStore.relativePath(of: delta.sha256)) })
        #expect(!requests.contains { $0.hasPrefix("/" + BlobStore.relativePath(of: v2.snapshot.sha256)) })
        let installed = try #require(device.directory.installed())
        #expect(try Snapshot.verify(at: installed.indexPath, expectedStateRoot: v2.stateRoot).stateRoot == v2.stateRoot)
        #expect(device.currentTarget == "versions/2" && device.previousTarget == "versions/1")
        #expect(try SearchIndex(path: installed.indexPath).chunk(id: "chunk-000")?.content == "flood maps revision 2")
    }

    /// Version 1 (no model) published, served by nginx and installed on a device; the caller stops nginx.
    private func versionOneFromNginx() async throws -> (RepoFixture, Nginx, Device) {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let nginx = try Nginx(root: repo.root)
        do {
            let device = try Device(repo: repo, sources: [nginx.url])
            #expect(await device.syncer.syncOnce().installedVersion == 1)
            return (repo, nginx, device)
        } catch {
            nginx.stop()
            throw error
        }
    }

    @Test("Given version 1 installed, when a delta sync fetches the manifest and then the delta, then both travel over one kept-alive connection")
    func oneConnectionPerSync() async throws {
        let (repo, nginx, device) = try await versionOneFromNginx()
        defer { nginx.stop() }
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), deltasFrom: [1])

        let before = nginx.accessLog.count
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        let requests = await nginx.accessLog(after: before, atLeast: 2)
        // nginx's `$connection`, the serial number of the connection a request came on, ends each line.
        let connections = Set(requests.compactMap { $0.split(separator: " ").last })
        #expect(requests.count == 2 && requests[0].contains("manifest.json") && requests[1].hasPrefix("/blobs/"))
        #expect(connections.count == 1, "the sync's requests came on connections \(connections)")
        #expect(await device.syncer.lastAttemptStats.connections <= 1)
    }

    @Test("Given the newest version installed, when polling again, then it costs one conditional request under 2 KB")
    func noChangePoll() async throws {
        let (_, nginx, device) = try await versionOneFromNginx()
        defer { nginx.stop() }
        #expect(device.state.sources?.first?.etag != nil)

        let before = nginx.accessLog.count
        #expect(await device.syncer.syncOnce().isUpToDate)
        let stats = await device.syncer.lastAttemptStats
        let requests = await nginx.accessLog(after: before, atLeast: 1)
        #expect(stats.requests == 1)
        #expect(stats.totalBytes < 2_048, "a no-change poll took \(stats.totalBytes) bytes")
        #expect(requests.count == 1 && requests[0].contains(" 304 "))
        #expect(device.state.lastCheck != nil)
    }
}
