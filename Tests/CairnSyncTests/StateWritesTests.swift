import CairnTestSupport
import CairnSync
import Foundation
import Synchronization
import Testing

/// How often `state.json` is written (protocol/data-directory.md, "state.json"): a device polls
/// for years, often on an SD card or eMMC.
@Suite("state.json writes", .offCooperativePool)
struct StateWritesTests {
    @Test("Given a device up to date that polls, when attempts change only routine fields (when they ran, how many, failures in a row past the first, an error's time), then state.json is not written again until an hour has passed since its last write, a field that matters changes (a source failing, answering again) or the state is flushed; the state read (status) has every attempt meanwhile")
    func routineAttemptsKeptInMemory() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let clock = Mutex(Date())
        func advance(_ seconds: TimeInterval) { clock.withLock { $0 += seconds } }
        let device = try Device(repo: repo, sources: [repo.url], now: { clock.withLock { $0 } })
        func onDisk() throws -> SyncState {
            try JSONDecoder().decode(SyncState.self, from: Data(contentsOf: URL(fileURLWithPath: device.path + "/state.json")))
        }
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        #expect(try onDisk().attempts == 1)

        // Up to date twice, five minutes apart: kept in memory.
        for _ in 0..<2 {
            advance(300)
            #expect(await device.syncer.syncOnce().errorCode == nil)
        }
        #expect(try onDisk().attempts == 1 && device.state.attempts == 3)
        #expect(device.state.lastCheck == SyncState.time(clock.withLock { $0 }))

        // An hour after the last write, the next attempt writes.
        advance(3600)
        await device.syncer.syncOnce()
        #expect(try onDisk().attempts == 4)

        // The source failing is written at once; failing again the same way is routine.
        let away = repo.root + ".away"
        #expect(rename(repo.root, away) == 0)
        advance(300)
        let failed = await device.syncer.syncOnce()
        #expect(failed.errorCode != nil, "\(failed)")
        #expect(try onDisk().attempts == 5 && onDisk().lastError?.code == failed.errorCode)
        #expect(try onDisk().sources?.first?.consecutiveFailures == 1)
        advance(300)
        #expect(await device.syncer.syncOnce().errorCode == failed.errorCode)
        #expect(try onDisk().attempts == 5 && device.state.sources?.first?.consecutiveFailures == 2)

        // Answering again is written.
        #expect(rename(away, repo.root) == 0)
        advance(300)
        #expect(await device.syncer.syncOnce().errorCode == nil)
        #expect(try onDisk().attempts == 7 && onDisk().lastError == nil)

        // What a routine attempt kept is written as cairnd stops.
        advance(300)
        await device.syncer.syncOnce()
        #expect(try onDisk().attempts == 7)
        await device.syncer.flushState()
        #expect(try onDisk().attempts == 8 && onDisk() == device.state)
    }

    @Test("Given a state written, when the wall clock is set back before the next routine attempt, then that attempt writes (the hour cannot be told)")
    func clockSetBackWrites() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let clock = Mutex(Date())
        let device = try Device(repo: repo, sources: [repo.url], now: { clock.withLock { $0 } })
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        clock.withLock { $0 -= 86_400 }
        await device.syncer.syncOnce()
        let state = try JSONDecoder().decode(SyncState.self, from: Data(contentsOf: URL(fileURLWithPath: device.path + "/state.json")))
        #expect(state.attempts == 2)
    }
}
