import CairnTestSupport
import CairnCore
import CairnStore
@testable import CairnSync
import Foundation
import Synchronization
import Testing

/// Channels of one cairnd that use the same model (`DIR/channels/<name>` beside `DIR`).
@Suite("A model shared by channels", .offCooperativePool)
struct ChannelModelTests {
    @Test("Given a channel that holds a model, when another channel's first install needs the same model, then its model folder is linked from the first (the same files, no second copy on disk) and it installs; a copy that fails its signed hash is not linked, and the model is downloaded instead")
    func modelLinkedFromAnotherChannel() async throws {
        let first = try RepoFixture(), second = try RepoFixture(), third = try RepoFixture()
        for repo in [first, second, third] { try repo.publish(version: 1) }
        let holder = try Device(repo: first, sources: [first.url])
        #expect(await holder.syncer.syncOnce().installedVersion == 1)
        let models = holder.path + "/models"
        let name = try #require(holder.entries("models").first)
        let files = try FileManager.default.contentsOfDirectory(atPath: models + "/" + name).sorted()
        #expect(!files.isEmpty)
        let inode = InPlaceDeltaTests.inode

        let linked = try Device(repo: second, sources: [second.url], path: holder.path + "/channels/second", otherChannels: [holder.path])
        #expect(await linked.syncer.syncOnce().installedVersion == 1)
        #expect(linked.entries("models") == [name])
        for file in files {
            let shared = inode(models + "/\(name)/\(file)")
            #expect(shared != nil && inode(linked.path + "/models/\(name)/\(file)") == shared, "\(file)")
        }

        // A damaged copy (the same size): the third channel downloads its own.
        let damaged = models + "/\(name)/vocab.txt"
        var bytes = try FileSystem.read(damaged)
        bytes[0] ^= 0x20
        try FileSystem.writeAtomically(bytes, to: damaged, mode: 0o644)
        let downloaded = try Device(repo: third, sources: [third.url], path: holder.path + "/channels/third",
                                    otherChannels: [holder.path])
        #expect(await downloaded.syncer.syncOnce().installedVersion == 1)
        #expect(inode(downloaded.path + "/models/\(name)/vocab.txt") != inode(damaged))
        let sha = try FileSystem.sha256(of: downloaded.path + "/models/\(name)/vocab.txt").id
        #expect(sha != (try FileSystem.sha256(of: damaged).id))
    }

    @Test("Given two channels whose first installs need the same model, when the second reaches the model while the first is still downloading it, then the second waits and links the first's folder rather than download it too")
    func channelsStartingTogetherDownloadTheModelOnce() async throws {
        let first = try RepoFixture(), second = try RepoFixture()
        for repo in [first, second] { try repo.publish(version: 1) }
        // The first channel's source holds each blob after its first bytes until the test lets go.
        let held = try FaultServer(root: first.root)
        defer { held.stop() }
        try held.set(["hold_after": 16])
        // As cairnd configures them: each channel names the others.
        let root = try TemporaryDirectory.make(), sub = root + "/channels/second"
        let holder = try Device(repo: first, sources: [held.url], path: root, otherChannels: [sub])
        let linked = try Device(repo: second, sources: [second.url], path: sub, otherChannels: [root])
        let staged = Set(first.modelFiles.map { "\($0.sha256.hex).partial" })
        async let firstOutcome = holder.syncer.syncOnce()
        try await waitUntil("the first channel downloads the model", seconds: 60) {
            holder.entries("staging").contains { staged.contains($0) }
        }
        async let secondOutcome = linked.syncer.syncOnce()
        let name = try #require(Manifest.Model(id: "m", dimension: 8, maxTokens: 16, files: first.modelFiles).folderName)
        let key = try #require(linked.syncer.modelFetchKey(name))
        try await waitUntil("the second channel waits for the first's model", seconds: 60) {
            ModelFetches.shared.waiting(for: key) == 1
        }
        // Status says what the second attempt waits for (it asks no source meanwhile).
        #expect(linked.syncer.progress.reading().current?.waiting == Syncer.waitingForModel)
        #expect(holder.syncer.progress.reading().current?.waiting == nil)
        try held.clear()
        #expect(await firstOutcome.installedVersion == 1)
        #expect(await secondOutcome.installedVersion == 1)
        #expect(holder.entries("models") == [name] && linked.entries("models") == [name])
        for file in first.modelFiles {
            let shared = InPlaceDeltaTests.inode(holder.path + "/models/\(name)/\(file.name)")
            #expect(shared != nil && InPlaceDeltaTests.inode(linked.path + "/models/\(name)/\(file.name)") == shared, "\(file.name)")
        }
    }

    @Test("Given another channel's fetch of a model that does not end, when a channel waits for it, then the wait ends at its limit (a limit of zero too, its timer ending before it parks), or when its task is cancelled (cairnd stopping), and leaves nothing behind; a fetch that ends lets its waiter go at once")
    func waitForAnotherChannelsModelIsBounded() async throws {
        let fetches = ModelFetches()
        #expect(fetches.begin("m"))
        // Were a wait not to end, the fetch is ended after 30 s, and the test fails (not hangs).
        final class Flag: Sendable { let raised = Mutex(false) }
        func bounded(_ what: String, _ body: @escaping @Sendable () async -> Void) async {
            _ = fetches.begin("m")  // running (again, if a failed case ended it)
            let endedByTest = Flag()
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await body() }
                group.addTask {
                    try? await Task.sleep(for: .seconds(30))
                    guard !Task.isCancelled else { return }
                    endedByTest.raised.withLock { $0 = true }
                    fetches.end("m")
                }
                await group.next()
                group.cancelAll()
            }
            #expect(!endedByTest.raised.withLock { $0 }, "\(what) did not end")
            #expect(fetches.waiting(for: "m") == 0 && fetches.marks == 0, "\(what)")
        }
        await bounded("a wait of 20 ms") { await fetches.wait(for: "m", atMost: .milliseconds(20)) }
        await bounded("100 waits of 0 ms") { for _ in 0..<100 { await fetches.wait(for: "m", atMost: .zero) } }
        await bounded("a cancelled wait") {
            await withTaskGroup(of: Void.self) { waiter in
                waiter.addTask { await fetches.wait(for: "m", atMost: .seconds(600)) }
                #expect(await eventuallyAsync(within: 30) { fetches.waiting(for: "m") == 1 }, "the waiter never parked")
                waiter.cancelAll()
            }
        }
        await bounded("a wait for a fetch that ends") {
            await withTaskGroup(of: Void.self) { waiter in
                waiter.addTask { await fetches.wait(for: "m", atMost: .seconds(600)) }
                #expect(await eventuallyAsync(within: 30) { fetches.waiting(for: "m") == 1 }, "the waiter never parked")
                fetches.end("m")
            }
        }
        #expect(fetches.begin("m"))
    }
}
