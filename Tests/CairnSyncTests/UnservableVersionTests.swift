import CairnTestSupport
import CairnCore
import CairnStore
import CairnSync
import Foundation
import Synchronization
import Testing

/// A version installed (or rolled back to) that the daemon cannot open: the daemon keeps serving
/// the one before, and the links must say so, or a later install would leave the version served
/// unreferenced and remove its folder under the queries. The daemon's failure to open is given
/// here through `onInstalled`, the syncer's side of that contract: an index that verifies and
/// yet does not open cannot be made for real after a fresh install. DeviceFlowTests
/// (`restartOpensRowsFiles`) makes one for real at start-up, by a version's rows files removed and
/// its stored hashes broken.
@Suite("A version the daemon cannot serve", .offCooperativePool)
struct UnservableVersionTests {
    /// Fails `onInstalled` for the versions in it: for their bytes, or with `notNow` as a daemon
    /// that cannot open them now (out of memory). `served`: the last version it opened.
    final class Refusing: Sendable {
        let versions = Mutex<Set<Int>>([])
        let notNow = Mutex(false)
        let served = Mutex<Int?>(nil)
        func open(_ version: InstalledVersion) throws(SyncError) {
            guard versions.withLock({ $0.contains(version.version) }) else {
                served.withLock { $0 = version.version }
                return
            }
            if notNow.withLock({ $0 }) {
                throw SyncError(.installFailed, "version \(version.version) is installed but cannot be opened now: out of memory",
                                cause: Syncer.CannotOpenNow())
            }
            throw SyncError(.installFailed, "version \(version.version) cannot be served: the test's daemon refuses it")
        }
    }

    /// A new device on a new repository, whose daemon refuses the versions in `refused` (and,
    /// later, those put into the returned `Refusing`).
    static func device(refusing refused: Set<Int> = []) throws -> (RepoFixture, Refusing, Device) {
        let repo = try RepoFixture(withModel: false)
        let refusing = Refusing()
        refusing.versions.withLock { $0 = refused }
        let device = try Device(repo: repo, sources: [repo.url], onInstalled: { version, _ throws(SyncError) in try refusing.open(version) })
        return (repo, refusing, device)
    }

    /// A device that installed versions 1 and 2 (by a delta), whose daemon refuses the versions
    /// in `refusing`.
    static func deviceOnVersion2() async throws -> (RepoFixture, Refusing, Device) {
        let (repo, refusing, device) = try device()
        try repo.publish(version: 1)
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), deltasFrom: [1])
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        return (repo, refusing, device)
    }

    @Test("Given two sources, when the first installs a version the daemon cannot serve, then the attempt does not say it installed before asking every source (the service would ask again at once, without back-off, for ever); a version it can serve does")
    func unservedInstallAsksNoOneAtOnce() async throws {
        let repo = try RepoFixture(withModel: false)
        let refusing = Refusing()
        refusing.versions.withLock { $0 = [1] }
        let unreachable = "http://127.0.0.1:9/repo"
        let device = try Device(repo: repo, sources: [repo.url, unreachable],
                                onInstalled: { version, _ throws(SyncError) in try refusing.open(version) })
        try repo.publish(version: 1)
        #expect(await device.syncer.syncOnce().errorCode == "install_failed")
        #expect(await device.syncer.installedBeforeAskingAll == false)
        refusing.versions.withLock { $0 = [] }
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        #expect(await device.syncer.installedBeforeAskingAll == true)
    }

    @Test("Given versions 1 then 2 installed, when version 3 installs but cannot be served, then the attempt fails saying so, current points at version 2 again, version 3's folder is gone, and a later attempt installs it")
    func installNotServed() async throws {
        let (repo, refusing, device) = try await Self.deviceOnVersion2()
        #expect(device.currentTarget == "versions/2" && device.previousTarget == "versions/1")

        refusing.versions.withLock { $0 = [3] }
        try repo.publish(version: 3, chunks: RepoFixture.chunks(revision: 3), deltasFrom: [2])
        let outcome = await device.syncer.syncOnce()
        #expect(outcome.errorCode == "install_failed")
        #expect(device.state.lastError?.message.contains("version 3 cannot be served") == true)
        // The links name the version the daemon still serves; the one it could not open is
        // gone, and nothing else is kept as a rollback target.
        #expect(device.currentTarget == "versions/2" && device.previousTarget == nil)
        #expect(device.entries("versions") == ["2"])
        #expect(device.state.installedVersion == 2)
        #expect(device.directory.installed()?.version == 2)

        refusing.versions.withLock { $0 = [] }
        #expect(await device.syncer.syncOnce().installedVersion == 3)
        #expect(device.currentTarget == "versions/3" && device.previousTarget == "versions/2")
        #expect(device.state.lastError == nil && device.state.installedVersion == 3)
    }

    /// Versions 1 and 2 installed and served, a rollback to 1 (2 held back), then version 3
    /// installed but kept unserved: the daemon (`Refusing`, whose `served` the syncer reads)
    /// cannot open it now.
    static func rolledBackWithVersion3Kept() async throws -> (RepoFixture, Refusing, Device) {
        let repo = try RepoFixture(withModel: false)
        let refusing = Refusing()
        let device = try Device(repo: repo, sources: [repo.url], onInstalled: { version, _ throws(SyncError) in try refusing.open(version) },
                                servedVersion: { refusing.served.withLock { $0 } })
        try repo.publish(version: 1)
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), deltasFrom: [1])
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        #expect(try await device.syncer.rollback().version.version == 1)
        try repo.publish(version: 3, chunks: RepoFixture.chunks(revision: 3), deltasFrom: [2])
        refusing.versions.withLock { $0 = [3] }
        refusing.notNow.withLock { $0 = true }
        #expect(await device.syncer.syncOnce().errorCode == "install_failed")
        return (repo, refusing, device)
    }

    @Test("Given a rollback from version 2 to 1 (2 held back), when version 3 installs but cannot be opened now (kept unserved), and then fails on its own bytes, then version 2 stays held back throughout (a stale source then offering it is passed over); once version 3 serves, the hold goes")
    func holdStaysUntilServed() async throws {
        let (repo, refusing, device) = try await Self.rolledBackWithVersion3Kept()
        #expect(device.currentTarget == "versions/3" && device.state.heldBackVersion == 2)
        refusing.notNow.withLock { $0 = false }
        #expect(await device.syncer.syncOnce().errorCode == "install_failed")
        #expect(device.currentTarget == "versions/1" && device.state.heldBackVersion == 2)

        try repo.makeCurrent(2)
        #expect(await device.syncer.syncOnce().isUpToDate)
        #expect(device.currentTarget == "versions/1")

        refusing.versions.withLock { $0 = [] }
        try repo.makeCurrent(3)
        #expect(await device.syncer.syncOnce().installedVersion == 3)
        #expect(device.state.heldBackVersion == nil)
    }

    @Test("Given a rollback from version 2 to 1 (2 held back), when version 3 installs but cannot be opened now, still not at the next attempt (the hold stays; a stale source offering version 2 meanwhile installs nothing), and opens at the one after, then the hold goes once it serves, not before")
    func holdEndsWhenKeptVersionOpens() async throws {
        let (repo, refusing, device) = try await Self.rolledBackWithVersion3Kept()
        #expect(device.state.heldBackVersion == 2)

        // Still not openable, with a stale source offering the held-back version meanwhile.
        try repo.makeCurrent(2)
        #expect(await device.syncer.syncOnce().errorCode == "install_failed")
        #expect(device.currentTarget == "versions/3" && refusing.served.withLock { $0 } == 1 && device.state.heldBackVersion == 2)

        try repo.makeCurrent(3)
        refusing.versions.withLock { $0 = [] }
        #expect(await device.syncer.syncOnce().isUpToDate)
        #expect(refusing.served.withLock { $0 } == 3 && device.state.heldBackVersion == nil)
    }

    @Test("Given a rollback from version 2 to 1 (2 held back) and a restart at which version 1 could not be opened (nothing served), when it opens at the next attempt, then the hold stays: a source offering version 2 is passed over")
    func rollbackHoldSurvivesAReopen() async throws {
        let repo = try RepoFixture(withModel: false)
        let path = try await Device.stopped(afterVersion2Of: repo, rollingBack: true)

        let refusing = Refusing()
        let restarted = try Device(repo: repo, sources: [repo.url], path: path,
                                   onInstalled: { version, _ throws(SyncError) in try refusing.open(version) },
                                   servedVersion: { refusing.served.withLock { $0 } })
        #expect(await restarted.syncer.syncOnce().isUpToDate)
        #expect(refusing.served.withLock { $0 } == 1 && restarted.state.heldBackVersion == 2)
        #expect(restarted.currentTarget == "versions/1")
    }

    @Test("Given versions 1 then 2 installed, when version 3 installs but cannot be opened for a reason outside its bytes (out of memory, a full disk), then it stays installed (current, its folder) while version 2 answers and version 1 goes, the next attempt opens it again without installing it again; a rollback to version 2, served, needs no open; version 4 arriving meanwhile keeps version 2, served, as its previous; once the cause passes the newest serves; the source stays healthy throughout")
    func installNotOpenableNow() async throws {
        let repo = try RepoFixture(withModel: false)
        final class Daemon: Sendable {
            let served = Mutex<Int?>(nil), failing = Mutex(false)
        }
        let daemon = Daemon()
        // The daemon's side, as cairnd's `onInstalled` answers a version whose open fails with
        // SQLite out of memory: such a failure cannot be made on demand here.
        let device = try Device(repo: repo, sources: [repo.url], onInstalled: { version, _ throws(SyncError) in
            if daemon.failing.withLock({ $0 }) {
                throw SyncError(.installFailed, "version \(version.version) is installed but cannot be opened now: out of memory",
                                cause: Syncer.CannotOpenNow())
            }
            daemon.served.withLock { $0 = version.version }
        }, servedVersion: { daemon.served.withLock { $0 } })
        try repo.publish(version: 1)
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), deltasFrom: [1])
        #expect(await device.syncer.syncOnce().installedVersion == 2)

        daemon.failing.withLock { $0 = true }
        try repo.publish(version: 3, chunks: RepoFixture.chunks(revision: 3), deltasFrom: [2])
        #expect(await device.syncer.syncOnce().errorCode == "install_failed")
        #expect(device.currentTarget == "versions/3" && device.previousTarget == "versions/2")
        #expect(device.state.installedVersion == 3 && daemon.served.withLock { $0 } == 2)
        #expect(device.state.sources?.first?.consecutiveFailures == 0, "the source is not failing: the device cannot open now")
        let inode = InPlaceDeltaTests.inode
        let index = device.path + "/versions/3/index.sqlite", before = inode(index)
        #expect(before != nil)

        // Version 1 went (the room may be what is short); version 2, served, stays linked.
        #expect(device.entries("versions") == ["2", "3"])

        // Still failing: opened again, not downloaded and built again.
        #expect(await device.syncer.syncOnce().errorCode == "install_failed")
        #expect(inode(index) == before && device.currentTarget == "versions/3")

        // A rollback goes to version 2, which answers already: nothing to open again (the
        // cause would fail it). Version 3 is held back.
        #expect(try await device.syncer.rollback().version.version == 2)
        #expect(device.currentTarget == "versions/2" && device.state.heldBackVersion == 3)

        // Version 4 arrives while the cause lasts: the version served, not the one kept, is
        // its rollback target, so no link leaves the served folder to a restart's clean-up.
        try repo.publish(version: 4, chunks: RepoFixture.chunks(revision: 4), deltasFrom: [3])
        #expect(await device.syncer.syncOnce().errorCode == "install_failed")
        #expect(device.currentTarget == "versions/4" && device.previousTarget == "versions/2", "\(device.entries("versions"))")
        #expect(device.entries("versions") == ["2", "4"] && daemon.served.withLock { $0 } == 2)
        #expect(device.state.sources?.first?.consecutiveFailures == 0, "the source is not failing: the device cannot open now")

        daemon.failing.withLock { $0 = false }
        let outcome = await device.syncer.syncOnce()
        #expect(outcome.errorCode == nil && daemon.served.withLock { $0 } == 4)
        #expect(device.state.lastError == nil && device.currentTarget == "versions/4")
    }

    @Test("Given version 3 installed but kept unopened (it could not be opened now) while version 2 answers, when the next attempt's open fails on its own bytes (damaged since), then it goes as a version that cannot be served: current points at version 2 again and the same attempt installs version 3 afresh, which serves")
    func keptVersionDamagedSince() async throws {
        let repo = try RepoFixture(withModel: false)
        enum Open: Sendable { case opens, cannotNow, damagedOnce }
        let served = Mutex<Int?>(nil), open = Mutex(Open.opens)
        // The daemon's side, as cairnd's `onInstalled` answers: out of memory first, then a
        // damaged index (neither can be made on demand here).
        let device = try Device(repo: repo, sources: [repo.url], onInstalled: { version, _ throws(SyncError) in
            switch open.withLock({ $0 }) {
            case .cannotNow:
                throw SyncError(.installFailed, "version \(version.version) is installed but cannot be opened now: out of memory",
                                cause: Syncer.CannotOpenNow())
            case .damagedOnce:
                open.withLock { $0 = .opens }
                throw SyncError(.installFailed, "version \(version.version) cannot be served: database disk image is malformed")
            case .opens:
                served.withLock { $0 = version.version }
            }
        }, servedVersion: { served.withLock { $0 } })
        try repo.publish(version: 1)
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), deltasFrom: [1])
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        open.withLock { $0 = .cannotNow }
        try repo.publish(version: 3, chunks: RepoFixture.chunks(revision: 3), deltasFrom: [2])
        #expect(await device.syncer.syncOnce().errorCode == "install_failed")
        #expect(device.currentTarget == "versions/3" && served.withLock { $0 } == 2)

        // Installed again (not opened again, as before: up to date at its source, the attempt
        // failed for ever).
        open.withLock { $0 = .damagedOnce }
        let outcome = await device.syncer.syncOnce()
        #expect(outcome.installedVersion == 3, "\(outcome)")
        #expect(served.withLock { $0 } == 3 && device.currentTarget == "versions/3" && device.previousTarget == "versions/2")
        #expect(device.state.lastError == nil)
    }

    @Test("Given a first install of version 1 not served, when the attempt fails, then it says why and current is dropped (nothing to fall back to), and the next attempt installs version 1 again instead of finding it up to date")
    func firstInstallNotServed() async throws {
        let (repo, refusing, device) = try Self.device(refusing: [1])
        try repo.publish(version: 1)
        #expect(await device.syncer.syncOnce().errorCode == "install_failed")
        #expect(device.state.lastError?.message.contains("version 1 cannot be served") == true)
        #expect(device.currentTarget == nil && device.previousTarget == nil)
        #expect(device.entries("versions").isEmpty)
        #expect(device.state.installedVersion == nil)

        // Whatever kept it from opening has passed: the next attempt installs it and it serves.
        refusing.versions.withLock { $0 = [] }
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        #expect(device.currentTarget == "versions/1" && device.state.lastError == nil)
    }

    @Test("Given version 2 installed first and found unservable (current dropped), when a source then offers version 1, then it is refused as a rollback and nothing installs; version 2 installs again and clears the floor")
    func forgottenVersionIsFloor() async throws {
        let (repo, refusing, device) = try Self.device(refusing: [2])
        try repo.publish(version: 1)
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2))
        #expect(await device.syncer.syncOnce().errorCode == "install_failed")
        #expect(device.currentTarget == nil && device.state.installedVersion == nil)
        #expect(device.state.forgottenVersion == 2)

        // A stale mirror (or an attacker replaying signed manifests) offers version 1.
        refusing.versions.withLock { $0 = [] }
        try repo.makeCurrent(1)
        let outcome = await device.syncer.syncOnce()
        #expect(outcome.errorCode == "rollback")
        #expect(device.state.lastError?.message.contains("older than version 2, installed until it could not be served") == true)
        #expect(device.currentTarget == nil && device.entries("versions").isEmpty)

        try repo.makeCurrent(2)
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        #expect(device.state.forgottenVersion == nil && device.state.forgottenStateRoot == nil)
    }

    /// A new device pinned to root 1 (root key `rootKey`, signing key `repo.key`, the one a thief
    /// steals), whose daemon refuses the versions put into `refusing`; `newKey` signs for a root 2.
    static func pinnedToRoot1() throws -> (RepoFixture, Refusing, Device, rootKey: PublisherKey, newKey: PublisherKey) {
        let (repo, rootKey, pinned) = try TrustSyncTests.rootedRepository()
        let newKey = PublisherKey.generate()
        let refusing = Refusing()
        let device = try Device(repo: repo, sources: [repo.url], trustedRoot: pinned,
                                onInstalled: { version, _ throws(SyncError) in try refusing.open(version) },
                                servedVersion: { refusing.served.withLock { $0 } })
        return (repo, refusing, device, rootKey, newKey)
    }

    @Test("Given a thief's version 1,000,000,000 (the stolen signing key's) installed first and found unservable, when the owner rotates the root to revoke that key and publishes version 2 with the new key, then version 2 installs: the forgotten floor goes with the revoked key")
    func revocationLiftsForgottenFloor() async throws {
        let (repo, refusing, device, rootKey, newKey) = try Self.pinnedToRoot1()
        refusing.versions.withLock { $0 = [1_000_000_000] }
        try repo.publish(version: 1_000_000_000)
        #expect(await device.syncer.syncOnce().errorCode == "install_failed")
        #expect(device.state.forgottenVersion == 1_000_000_000 && device.state.installedVersion == nil)
        #expect(device.state.highestVersionSeen == 1_000_000_000)

        try TrustSyncTests.put(try TrustSyncTests.root(2, rootKey: rootKey, signingKey: newKey, signers: [rootKey]), root: 2, in: repo)
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), signer: newKey)
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        #expect(device.state.forgottenVersion == nil)
        // The thief's number no longer makes the device look behind.
        #expect(device.state.highestVersionSeen == 2)
    }

    @Test("Given a thief's version 2 (the stolen key's) installed and a rotation revoking that key, when the publisher's own version 2 installs over it but cannot be served (for its bytes, or not now), then the thief's copy, which serves, goes back in place and the device is still recovering; once it can be served the publisher's version 2 installs",
          arguments: [false, true])
    func recoveryAtTheSameNumberNotServed(notNow: Bool) async throws {
        let (repo, refusing, device, rootKey, newKey) = try Self.pinnedToRoot1()
        refusing.notNow.withLock { $0 = notNow }
        try repo.publish(version: 2)
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        let thiefs = try #require(device.directory.installed()?.stateRoot)

        try TrustSyncTests.put(try TrustSyncTests.root(2, rootKey: rootKey, signingKey: newKey, signers: [rootKey]), root: 2, in: repo)
        #expect(await device.syncer.syncOnce().errorCode == "key_revoked")
        #expect(device.state.recoveringFrom == 2)
        // Made since the rotation: at or below the installed number, only such a version replaces it.
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), signer: newKey) { $0.created = Timestamp(Date().addingTimeInterval(1))! }
        refusing.versions.withLock { $0 = [2] }
        #expect(await device.syncer.syncOnce().errorCode == "install_failed")
        #expect(device.currentTarget == "versions/2" && device.directory.installed()?.stateRoot == thiefs)
        #expect(device.entries("versions") == ["2"] && device.state.recoveringFrom == 2)
        #expect(device.state.installedStateRoot == thiefs.hex)

        refusing.versions.withLock { $0 = [] }
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        #expect(device.directory.installed()?.stateRoot != thiefs && device.state.recoveringFrom == nil)
    }

    @Test("Given a thief's version 2 installed and a rotation revoking its key, when the publisher's version 2 is renamed into place but the links cannot then be changed, then the thief's copy goes back in place and the device is still recovering; once the links can change the publisher's version 2 installs")
    func recoveryAtTheSameNumberCutShort() async throws {
        let (repo, _, device, rootKey, newKey) = try Self.pinnedToRoot1()
        try repo.publish(version: 2)
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        let thiefs = try #require(device.directory.installed()?.stateRoot)
        try TrustSyncTests.put(try TrustSyncTests.root(2, rootKey: rootKey, signingKey: newKey, signers: [rootKey]), root: 2, in: repo)
        #expect(await device.syncer.syncOnce().errorCode == "key_revoked")
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), signer: newKey) { $0.created = Timestamp(Date().addingTimeInterval(1))! }

        // A real failing link edit after the folder's rename: a folder where `current.tmp` is
        // made (unlink fails, symlink meets EEXIST), as a failing card's EIO would.
        let stuck = device.path + "/current.tmp"
        try FileManager.default.createDirectory(atPath: stuck, withIntermediateDirectories: false)
        let cut = await device.syncer.syncOnce()
        #expect(cut.errorCode == "io", "\(cut)")
        #expect(device.currentTarget == "versions/2" && device.directory.installed()?.stateRoot == thiefs)
        #expect(device.entries("versions") == ["2"] && device.state.recoveringFrom == 2)

        try FileManager.default.removeItem(atPath: stuck)
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        #expect(device.directory.installed()?.stateRoot != thiefs && device.state.recoveringFrom == nil)
    }

    @Test("Given versions 1 and 2 installed, when a rollback to version 1 cannot be served, then it fails with previous_unusable, and the links, the held-back version and the rollback target are as before")
    func rollbackNotServed() async throws {
        let (_, refusing, device) = try await Self.deviceOnVersion2()

        refusing.versions.withLock { $0 = [1] }
        await #expect { try await device.syncer.rollback() } throws: { error in
            (error as? SyncError)?.code == .previousUnusable && (error as? SyncError)?.message.contains("cannot be served") == true
        }
        #expect(device.currentTarget == "versions/2" && device.previousTarget == "versions/1")
        #expect(device.state.heldBackVersion == nil && device.state.installedVersion == 2)
        #expect(device.entries("versions") == ["1", "2"])

        // Served, the same rollback goes through.
        refusing.versions.withLock { $0 = [] }
        #expect(try await device.syncer.rollback().version.version == 1)
        #expect(device.currentTarget == "versions/1" && device.state.heldBackVersion == 2)
    }

    @Test("Given versions 1 and 2 installed, when version 1's manifest.json is damaged, then a rollback fails with previous_unusable saying why (not no_previous_version), and nothing changes")
    func rollbackToDamagedPrevious() async throws {
        let (_, _, device) = try await Self.deviceOnVersion2()
        try Data("{".utf8).write(to: URL(fileURLWithPath: device.path + "/versions/1/manifest.json"))
        await #expect { try await device.syncer.rollback() } throws: { error in
            (error as? SyncError)?.code == .previousUnusable && (error as? SyncError)?.message.contains("not a manifest") == true
        }
        #expect(device.currentTarget == "versions/2" && device.previousTarget == "versions/1")
        #expect(device.state.heldBackVersion == nil)
    }

    @Test("Given versions 1 and 2 installed, when a rollback to version 1 cannot be served and is put back, then version 2 keeps the rows its install loaded: the next delta is checked by the set hash, not inside its transaction")
    func rollbackPutBackKeepsRows() async throws {
        let (repo, refusing, device) = try await Self.deviceOnVersion2()
        refusing.versions.withLock { $0 = [1] }
        await #expect(throws: SyncError.self) { try await device.syncer.rollback() }
        refusing.versions.withLock { $0 = [] }
        try repo.publish(version: 3, chunks: RepoFixture.chunks(revision: 3), deltasFrom: [2])
        #expect(await device.syncer.syncOnce().installedVersion == 3)
        // Before 2026-12-06 the failed rollback dropped them: "transaction".
        #expect(await device.syncer.lastDeltaCheck == "set_hash")
    }
}
