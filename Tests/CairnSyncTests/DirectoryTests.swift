import CairnTestSupport
import CairnCore
import CairnStore
@testable import CairnSync
import Foundation
import Logging
import Testing

@Suite("DataDirectory: lock, crash recovery, status", .offCooperativePool)
struct DirectoryTests {
    @Test("Given a data directory in use, when a second one opens it, then it is refused with a clear message")
    func lock() throws {
        let path = try TemporaryDirectory.make()
        var first: DataDirectory? = try DataDirectory(path: path, logger: Logger(label: "test"))
        #expect(throws: SyncError.self) { _ = try DataDirectory(path: path, logger: Logger(label: "test")) }
        do { _ = try DataDirectory(path: path, logger: Logger(label: "test")) } catch {
            #expect(error.code == .locked && error.message.contains("another cairnd"))
        }
        #expect(first != nil)
        first = nil
        // Released with the first value: a later cairnd may take it. (For an instant a process
        // that a parallel test forks may still share the descriptor, until its exec closes it:
        // the lock goes with the last holder, as Device.open in Support waits for.)
        #expect(eventually(within: 20) { (try? DataDirectory(path: path, logger: Logger(label: "test"))) != nil })
    }

    @Test("Given an interruption left partial folders, junk and a dangling current.tmp, when recovering, then the last complete version serves and the next sync completes")
    func crashRecovery() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        var device: Device? = try Device(repo: repo, sources: [repo.url])
        #expect(await device!.syncer.syncOnce().installedVersion == 1)
        try repo.publish(version: 2)
        #expect(await device!.syncer.syncOnce().installedVersion == 2)
        let path = device!.path
        device = nil // the process "dies": its lock goes with it

        let fm = FileManager.default
        try fm.createDirectory(atPath: path + "/versions/3.partial", withIntermediateDirectories: true)
        try Data("half".utf8).write(to: URL(fileURLWithPath: path + "/versions/3.partial/index.sqlite"))
        try fm.createDirectory(atPath: path + "/versions/7", withIntermediateDirectories: true)
        try fm.createSymbolicLink(atPath: path + "/current.tmp", withDestinationPath: "versions/3.partial")
        let resumable = String(repeating: "ab", count: 32) + ".partial"
        try Data("resume me".utf8).write(to: URL(fileURLWithPath: path + "/staging/" + resumable))
        try Data("junk".utf8).write(to: URL(fileURLWithPath: path + "/staging/.tmp-123"))
        // An atomic write cut in the roots' folder (a power cut leaves it).
        try fm.createDirectory(atPath: path + "/roots", withIntermediateDirectories: true)
        try Data("half a root".utf8).write(to: URL(fileURLWithPath: path + "/roots/.tmp-4f2a"))

        let restarted = try Device(repo: repo, sources: [repo.url], path: path) // runs recover()
        #expect(restarted.entries("roots").isEmpty)
        #expect(restarted.directory.installed()?.version == 2)
        #expect(restarted.entries("versions") == ["1", "2"])
        #expect(!fm.fileExists(atPath: path + "/current.tmp"))
        #expect(restarted.entries("staging") == [resumable])

        try repo.publish(version: 3, deltasFrom: [2])
        #expect(await restarted.syncer.syncOnce().installedVersion == 3)
        #expect(restarted.entries("versions") == ["2", "3"])
    }

    @Test("Given current names a missing version, when recovering, then previous becomes current")
    func fallbackToPrevious() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        var device: Device? = try Device(repo: repo, sources: [repo.url])
        await device!.syncer.syncOnce()
        try repo.publish(version: 2)
        await device!.syncer.syncOnce()
        let path = device!.path
        device = nil
        try FileManager.default.removeItem(atPath: path + "/versions/2/manifest.json")
        let restarted = try Device(repo: repo, sources: [repo.url], path: path)
        #expect(restarted.directory.installed()?.version == 1)
        #expect(restarted.currentTarget == "versions/1" && restarted.previousTarget == nil)
        #expect(restarted.entries("versions") == ["1"])
        #expect(restarted.state.installedVersion == 1)
    }

    @Test("Given a stop inside an install of a version's own number (the served folder moved to versions/2.replaced, the new one not in place: before the install's second rename, or inside the put-back after a failed handover), when recovering, then that copy goes back and serves, and what was half done goes")
    func replacedCopyMovedBack() async throws {
        let repo = try RepoFixture(withModel: false)
        let path = try await Device.stopped(afterVersion2Of: repo)
        let fm = FileManager.default
        try fm.moveItem(atPath: path + "/versions/2", toPath: path + "/versions/2.replaced")
        try fm.createDirectory(atPath: path + "/versions/2.partial", withIntermediateDirectories: true)
        try Data("half".utf8).write(to: URL(fileURLWithPath: path + "/versions/2.partial/index.sqlite"))

        let restarted = try Device(repo: repo, sources: [repo.url], path: path)
        #expect(restarted.directory.installed()?.version == 2)
        #expect(restarted.currentTarget == "versions/2" && restarted.previousTarget == "versions/1")
        #expect(restarted.entries("versions") == ["1", "2"])
        #expect(await restarted.syncer.syncOnce().isUpToDate)
    }

    @Test("Given the only version does not read at start-up, when recovering, then nothing is installed but its link and folder stay, that version is the floor, and a sync installs it again over its folder")
    func onlyVersionMissing() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        try repo.publish(version: 2)
        var device: Device? = try Device(repo: repo, sources: [repo.url])
        #expect(await device!.syncer.syncOnce().installedVersion == 2)
        let path = device!.path
        device = nil
        try FileManager.default.removeItem(atPath: path + "/versions/2/manifest.json")
        let restarted = try Device(repo: repo, sources: [repo.url], path: path)
        #expect(restarted.directory.installed() == nil && restarted.currentTarget == "versions/2")
        #expect(restarted.entries("versions") == ["2"])
        #expect(restarted.state.installedVersion == nil && restarted.state.forgottenVersion == 2)
        try repo.makeCurrent(1)
        #expect(await restarted.syncer.syncOnce().errorCode == "rollback")
        try repo.makeCurrent(2)
        #expect(await restarted.syncer.syncOnce().installedVersion == 2)
        #expect(restarted.state.forgottenVersion == nil)
        #expect(restarted.directory.installed()?.version == 2 && restarted.entries("versions") == ["2"])
    }

    @Test("Given the only version's manifest is one this cairnd cannot parse (written by a newer one, or damaged) and no source, when recovering, then nothing is removed, and it serves again once the manifest reads")
    func unreadableVersionKept() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        var device: Device? = try Device(repo: repo, sources: [repo.url])
        #expect(await device!.syncer.syncOnce().installedVersion == 1)
        let path = device!.path
        device = nil
        let manifest = path + "/versions/1/manifest.json"
        let good = try FileSystem.read(manifest)
        try FileSystem.writeAtomically(Array(#"{"manifest": {"format": 99}}"#.utf8), to: manifest)
        var offline: Device? = try Device(repo: repo, sources: [], path: path)
        #expect(offline!.directory.installed() == nil && offline!.currentTarget == "versions/1")
        #expect(offline!.entries("versions") == ["1"])
        #expect(FileManager.default.fileExists(atPath: path + "/versions/1/index.sqlite"))
        offline = nil
        try FileSystem.writeAtomically(good, to: manifest)
        let back = try Device(repo: repo, sources: [], path: path)
        #expect(back.directory.installed()?.version == 1)
        #expect(back.state.installedVersion == 1 && back.state.forgottenVersion == nil)
    }

    @Test("Given a state.json of which some fields do not read (an ill-typed number, a source entry without its url, a field this build does not know), when the state is read, then every other field is kept, the clock floor and the held-back version among them, and the file stays where it is, copied aside to state.json.unreadable; the unknown field is written back with the next state")
    func stateFieldsReadOneByOne() throws {
        let path = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory(path: path, logger: Logger(label: "test"))
        let text = #"""
            {"installed_version": 4, "highest_version_seen": "seven", "held_back_version": 6,
             "clock_floor": "2026-11-30T08:00:00Z", "forgotten_version": null, "last_error": {"code": "network"},
             "sources": [{"url": "https://kb.example.org/repo", "consecutive_failures": 2}, {"consecutive_failures": 1}],
             "shards_seen": [1, 2]}
            """#
        try FileSystem.writeAtomically(Array(text.utf8), to: directory.statePath)
        let state = directory.readState()
        #expect(state.installedVersion == 4 && state.heldBackVersion == 6 && state.clockFloor == "2026-11-30T08:00:00Z")
        #expect(state.highestVersionSeen == nil && state.lastError == nil)
        #expect(state.sources?.map(\.url) == ["https://kb.example.org/repo"] && state.sources?.first?.consecutiveFailures == 2)
        // Kept in place, and copied aside for a person to read.
        #expect(FileManager.default.fileExists(atPath: directory.statePath))
        #expect(try FileSystem.read(directory.statePath + ".unreadable") == Array(text.utf8))
        #expect(DataDirectory.fieldsLeftOut(DataDirectory.jsonObject(Array(text.utf8)) ?? [:], state) == ["highest_version_seen", "last_error", "shards_seen", "sources (1 entries)"])

        // The field this build does not know (a newer cairnd's) is written back with the state.
        var next = state
        next.lastAttempt = "2026-12-01T00:00:00Z"
        try directory.writeState(next)
        let written = try JSONSerialization.jsonObject(with: Data(try FileSystem.read(directory.statePath))) as? [String: Any]
        #expect(written?["shards_seen"] as? [Int] == [1, 2] && written?["last_attempt"] as? String == "2026-12-01T00:00:00Z", "\(String(describing: written))")
        #expect(written?["highest_version_seen"] == nil)
    }

    @Test("Given a state.json holding a field a newer cairnd wrote (kept by a downgrade), when the state is read and written back at every attempt, then the notice naming the field is logged once, not at every poll")
    func unknownFieldsSaidOnce() throws {
        let path = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let capture = LogCapture()
        let directory = try DataDirectory(path: path, logger: Logger(label: "test") { _ in capture })
        try FileSystem.writeAtomically(Array(#"{"installed_version": 4, "shards_seen": [1, 2]}"#.utf8), to: directory.statePath)
        for attempt in 1...3 {
            var state = directory.readState()
            state.attempts = attempt
            try directory.writeState(state)
            let written = try JSONSerialization.jsonObject(with: Data(try FileSystem.read(directory.statePath))) as? [String: Any]
            #expect(written?["attempts"] as? Int == attempt && written?["shards_seen"] != nil, "the file was not written again")
        }
        #expect(capture.entries.filter { $0.message.contains("shards_seen") }.count == 1, "\(capture.entries.map(\.message))")
    }

    @Test("Given the health of a source no longer configured in state.json (a URL since changed, with its credentials), when the device syncs, then the entry is dropped")
    func removedSourcesForgotten() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url])
        var state = device.directory.readState()
        state.withSource("https://device:old-secret@old.example/repo") { $0.consecutiveFailures = 3 }
        try device.directory.writeState(state)
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        #expect(device.directory.readState().sources?.map(\.url) == [repo.url])
        #expect(try !FileSystem.readText(device.directory.statePath).contains("old-secret"))
    }

    @Test("Given a newer link (a version a newer cairnd installed, kept by a downgrade) whose folder is gone, when the directory is recovered, then the link goes instead of being reported for ever")
    func danglingNewerLinkDropped() throws {
        let path = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory(path: path, logger: Logger(label: "test"))
        try FileManager.default.createSymbolicLink(atPath: directory.newerLink, withDestinationPath: "versions/9")
        #expect(directory.newerVersion() == 9)
        try directory.recover()
        #expect(directory.newerVersion() == nil && (try? FileManager.default.destinationOfSymbolicLink(atPath: directory.newerLink)) == nil)
    }

    @Test("Given a state.json that cannot be read for a moment (here a folder in its place: EISDIR, as EMFILE or EIO would fail), when the state is read, then the state last written answers and the file is left where it is, not moved aside as damaged")
    func stateUnreadableForAMoment() async throws {
        let (_, device) = try await DeltaTrustTests.deviceOnVersion1()
        let path = device.path + "/state.json"
        let saved = try FileSystem.read(path)
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        #expect(device.directory.readState().installedVersion == 1)
        #expect(!FileManager.default.fileExists(atPath: path + ".unreadable"))
        try FileManager.default.removeItem(atPath: path)
        try FileSystem.writeAtomically(saved, to: path)
    }

    @Test("Given no successful check for longer than the stale window, then status is stale though nothing newer is known")
    func staleByTime() {
        var state = SyncState()
        state.lastCheck = "2026-01-01T00:00:00Z"
        state.lastAttemptReachedSource = false
        let now = Timestamp(rfc3339: "2026-01-01T00:40:00Z")!.date
        let fresh = SyncStatus(state: state, installed: nil, now: now, pollInterval: .seconds(900), staleAfterPolls: 3)
        let late = SyncStatus(state: state, installed: nil, now: now.addingTimeInterval(3_600), pollInterval: .seconds(900), staleAfterPolls: 3)
        #expect(!fresh.stale && late.stale && !late.online)
    }

    @Test("Given a clock that moved (reset to 1970 under a clock floor of 2026, or set back from 2030), then a check just made is fresh and a check stamped years ahead of the clock is stale")
    func staleByWallClock() {
        var state = SyncState()
        state.clockFloor = "2026-06-01T00:00:00Z"
        state.lastAttemptReachedSource = true
        // A device whose clock says 1970 (its battery died) checks successfully at 1970 + 10 min.
        state.lastCheck = "1970-01-01T00:10:00Z"
        let reset = SyncStatus(state: state, installed: nil, now: Timestamp(rfc3339: "1970-01-01T00:20:00Z")!.date,
                               pollInterval: .seconds(900), staleAfterPolls: 3)
        #expect(!reset.stale)
        // Its last check was stamped in 2030 by a clock that ran ahead, since set back to 2026.
        state.lastCheck = "2030-01-01T00:00:00Z"
        let setBack = SyncStatus(state: state, installed: nil, now: Timestamp(rfc3339: "2026-07-01T00:00:00Z")!.date,
                                 pollInterval: .seconds(900), staleAfterPolls: 3)
        #expect(setBack.stale)
    }
}
