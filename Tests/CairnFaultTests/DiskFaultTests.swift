import CairnTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A real small file system under the data directory: a tmpfs this test mounts (as root;
/// elsewhere the test skips, or fails under CAIRN_REQUIRE_MODEL=1). The disk is filled by a real
/// file while a throttled download is in flight, so the write that fails is cairnd's own;
/// read-only is a real remount.
@Suite("Faults: disk", .offCooperativePool, .serialized)
struct DiskFaultTests {
    /// A rig on `disk` that installed versions 1 and 2 (`current` and `previous`), its cairnd
    /// stopped, with the rows files of `dropRowsOf` removed (rebuilt from the index at start-up
    /// when missing; the overlay goes too, since its pages would make room on a full disk), and
    /// a `tmp` folder on the disk for TMPDIR; nil (recorded) when version 2 did not install.
    static func twoVersionsStopped(on disk: Tmpfs, dropRowsOf versions: [String]) async throws -> (Rig, temporary: String)? {
        let rig = try await Rig(dataDirectory: disk.path + "/data")
        _ = try rig.publishNext()
        let data = rig.device.dataDirectory
        if let failed = try await rig.recovery(to: 2) {
            Issue.record("\(failed)")
            rig.stop()
            return nil
        }
        let link = { (name: String) in try? FileManager.default.destinationOfSymbolicLink(atPath: data + "/" + name) }
        #expect(link("current") == "versions/2" && link("previous") == "versions/1")
        rig.device.stop()
        for version in versions {
            for file in ["index.rows", "index.overlay"] { unlink(data + "/versions/\(version)/" + file) }
        }
        let temporary = disk.path + "/tmp"
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        return (rig, temporary)
    }

    /// The bytes of a blob the fault server sends before it holds the rest: the disk is filled
    /// while it holds, so the download meets the full disk however the two processes are
    /// scheduled (a rate alone let a starved test fill the disk after the download).
    static let heldAfter = 4_096

    /// Whether one of `blobs` (the new version's) has reached the hold in the device's staging
    /// folder: this attempt's download is in flight, so its free-space check has passed. (A
    /// partial file of an older version, kept to resume, does not count.)
    static func downloading(_ rig: Rig, blobs: [(sha: String, size: Int)]) -> Bool {
        let staging = rig.device.dataDirectory + "/staging"
        return eventually(within: 30) {
            blobs.contains {
                ((try? FileManager.default.attributesOfItem(atPath: staging + "/\($0.sha).partial"))?[.size] as? Int ?? 0) >= heldAfter
            }
        }
    }

    /// One sync attempt during whose download the disk is filled, to the last byte or
    /// (`roomForBlob`) leaving room for the version's largest blob but not for what the install
    /// writes beside it; then the rest of the blob is sent.
    static func attemptFillingDisk(_ rig: Rig, _ disk: Tmpfs, roomForBlob: Bool) async throws -> (code: String, message: String)? {
        let blobs = try rig.currentBlobs()
        try rig.server.set(["hold_after": heldAfter])
        return try await rig.syncAttempt {
            // Lifting the hold: a control file that fails to write leaves it, and libcurl's
            // low-speed limit then ends the attempt as a transport error, which the test names.
            defer { try? rig.server.clear() }
            guard Self.downloading(rig, blobs: blobs) else { return }
            disk.fill(leaving: roomForBlob ? Int64(blobs.map(\.size).max() ?? 0) + 8_192 : 0)
        }
    }

    /// After a disk_full refusal: nil when no half version is left and, with the space back and
    /// the fault server's faults cleared, the next attempt installs `version`; else the problem.
    static func recovers(_ rig: Rig, _ disk: Tmpfs, to version: Int) async throws -> String? {
        let partial = (try? FileManager.default.contentsOfDirectory(atPath: rig.device.dataDirectory + "/versions"))?
            .filter { $0.hasSuffix(".partial") } ?? []
        if !partial.isEmpty { return "half versions left: \(partial)" }
        disk.emptyFiller()
        try rig.server.clear()
        return try await rig.recovery(to: version)
    }

    /// A rig whose data directory is on a tmpfs of `megabytes` (`config` as `Rig`'s): `body`
    /// gets both, and both are stopped after it.
    static func onTmpfs(megabytes: Int, config: [String: String] = [:], _ body: (Tmpfs, Rig) async throws -> Void) async throws {
        let disk = try Tmpfs(megabytes: megabytes)
        defer { disk.unmount() }
        let rig = try await Rig(config: config, dataDirectory: disk.path + "/data")
        defer { rig.stop() }
        try await body(disk, rig)
    }

    /// Two trials of one attempt whose download meets a disk filled by `attemptFillingDisk`: a
    /// version with `bulk` bytes of random words is published (`prepare` may change its
    /// manifest), the attempt must fail `disk_full` with the old version answering, `check` gets
    /// cairnd's message and this attempt's log (nil when the failure came where it should), and
    /// with space back the version installs. `done` ends the report's line.
    static func fillingTrials(_ name: String, _ rig: Rig, _ disk: Tmpfs, bulk: Int, roomForBlob: Bool, done: String,
                              prepare: () throws -> Void = {}, check: (_ message: String, _ log: String) -> String?) async {
        let report = FaultReport(name)
        var reason = ""
        for number in 1...2 {
            await report.trial(number) {
                defer { disk.emptyFiller() }
                let old = rig.version
                let new = try rig.publishNext(bulk: bulk)
                try prepare()
                let logged = rig.device.log.utf8.count
                let outcome = try await Self.attemptFillingDisk(rig, disk, roomForBlob: roomForBlob)
                reason = outcome.map { "\($0.code): \($0.message)" } ?? ""
                if let problem = rig.refusal(outcome, codes: ["disk_full"], old: old) { return problem }
                if let problem = check(outcome?.message ?? "", String(decoding: rig.device.log.utf8.dropFirst(logged), as: UTF8.self)) {
                    return problem
                }
                return try await Self.recovers(rig, disk, to: new)
            }
        }
        #expect(report.finish("\(reason.prefix(90)); \(done)"))
    }

    @Test("Given the disk filling during a download and during an apply, then the attempt fails as disk_full, leaves no half version, and resumes when space returns")
    func diskFills() async throws {
        // 64 MiB is cairnd's free-space margin: the disk must pass that check, then fill.
        try await Self.onTmpfs(megabytes: 80) { disk, rig in
            for (name, duringDownload) in [("disk fills during download", true), ("disk fills during apply", false)] {
                // Blobs of several pages: tmpfs allocates by page, so a blob inside the one page
                // already written would never meet the full disk. During download: nothing left.
                // During apply: room for the rest of the blob but not for the new index beside
                // the live one.
                await Self.fillingTrials(name, rig, disk, bulk: 40_000, roomForBlob: !duringDownload,
                                         done: "no half file; installed once space returned") { message, attemptLog in
                    // When it failed, in cairnd's own words. The downloader says "while
                    // downloading". An apply that fails says the disk filled copying the index
                    // "to apply the delta" or "while applying the delta" (SQLite hit the full
                    // disk in place), that the snapshot "cannot be installed" or it "cannot
                    // create" the version folder; or this attempt's log says the "delta path
                    // failed" (the refusal is then the full snapshot's space check).
                    let duringApply = ["cannot be installed", "to apply the delta", "while applying the delta", "cannot create"].contains(where: message.contains)
                        || attemptLog.contains("delta path failed")
                    guard duringDownload ? !message.contains("while downloading") || duringApply : !duringApply else { return nil }
                    return "expected the disk to fill \(duringDownload ? "during the download" : "after it, during the apply"): \(message)"
                }
            }
        }
    }

    /// The direct variant writes with O_DIRECT where the tmpfs offers it (Linux 6.6 on), else
    /// through the write-behind: either way not the cached path the default takes here.
    @Test("Given the disk filling while a full snapshot is inflated, its index written through the page cache (the default for a small one) or around it (direct_install_min_bytes 0), then the attempt fails as disk_full while installing, leaves no half version, and installs once space returns",
          arguments: ["64M", "0"])
    func diskFillsDuringInflation(directMinimum: String) async throws {
        try await Self.onTmpfs(megabytes: 80, config: ["direct_install_min_bytes": directMinimum]) { disk, rig in
            // A publisher that offers no delta: the device installs the snapshot. Room for the
            // rest of the blob, not for the index it inflates to.
            await Self.fillingTrials("disk fills while a snapshot inflates (direct_install_min_bytes \(directMinimum))", rig, disk,
                                     bulk: 200_000, roomForBlob: true, done: "no half version; installed once space returned",
                                     prepare: { try rig.tamperManifest { $0.deltas = [] } }) { message, _ in
                message.contains("the snapshot cannot be installed") ? nil : "expected the disk to fill while the snapshot inflated: \(message)"
            }
        }
    }

    @Test("Given a full disk at start-up on which the current version cannot be opened, so the previous one serves, when a newer version is published and the disk is still full, then the attempt fails without removing the version served; once space returns the newest installs, its delta applied to a copy, never in place to the file served")
    func servedPreviousKeptOnFullDisk() async throws {
        let disk = try Tmpfs(megabytes: 80)
        defer { disk.unmount() }
        guard let (rig, temporary) = try await Self.twoVersionsStopped(on: disk, dropRowsOf: ["2"]) else { return }
        defer { rig.stop() }
        let data = rig.device.dataDirectory
        let third = try rig.publishNext()
        disk.fill(leaving: 0)
        defer { disk.emptyFiller() }
        let device = try DeviceProcess(rig.workspace, sources: [rig.server.url], name: "restarted", dataDirectory: data,
                                       environment: ["TMPDIR": temporary])
        defer { device.stop() }
        try await device.waitForVersion(1)
        // The attempt at start and this one fail for want of room; version 1 keeps its folder.
        _ = try device.cairn(["sync"])
        try await waitUntil("an attempt ends", seconds: 60) { (device.syncStatus["attempts_finished"] as? Int ?? 0) >= 2 }
        #expect(FileManager.default.fileExists(atPath: data + "/versions/1/index.sqlite"))
        #expect(try device.query("release notes edition", mode: "lexical").ids.first == "release-1")
        disk.emptyFiller()
        _ = try device.cairn(["sync"])
        try await device.waitForVersion(third)
        // Version 2's kept delta could bring version 1's index up to date for the new delta, but
        // that is the file being served: the delta is applied to a copy instead.
        // (Logged after the version serves.)
        var timings: Substring?
        try await waitUntil("the install's timings are logged", seconds: 60) {
            timings = device.log.split(separator: "\n").first { $0.contains("install timings") && $0.contains("cairn.sync.version=\(third)") }
            return timings != nil
        }
        #expect(timings?.contains("cairn.sync.path=delta") == true && timings?.contains("delta-in-place") == false, "\(device.log)")
    }

    @Test("Given cairnd killed between an install's swap and its state write (state.json still names the version before) and a full disk at the next start, then cairnd starts and serves the installed version, says in one line that the state cannot be saved, and saves it once space returns")
    func staleStateOnFullDisk() async throws {
        let disk = try Tmpfs(megabytes: 80)
        defer { disk.unmount() }
        guard let (rig, _) = try await Self.twoVersionsStopped(on: disk, dropRowsOf: []) else { return }
        defer { rig.stop() }
        let data = rig.device.dataDirectory
        let statePath = data + "/state.json"
        func installedInState() -> Int? {
            let json = FileManager.default.contents(atPath: statePath).flatMap { try? JSONSerialization.jsonObject(with: $0) }
            return (json as? [String: Any])?["installed_version"] as? Int
        }
        // What the kill leaves: the links at version 2, the state at version 1.
        var state = try #require(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: statePath))) as? [String: Any])
        state["installed_version"] = 1
        try JSONSerialization.data(withJSONObject: state).write(to: URL(fileURLWithPath: statePath))
        disk.fill(leaving: 0)
        defer { disk.emptyFiller() }
        let device = try DeviceProcess(rig.workspace, sources: [rig.server.url], name: "restarted", dataDirectory: data)
        defer { device.stop() }
        try await device.waitForVersion(2)
        #expect(try device.query("release notes edition", mode: "lexical").ids.first == "release-2")
        #expect(device.log.contains("the sync state cannot be saved now"), "\(device.log)")
        #expect(installedInState() == 1)
        disk.emptyFiller()
        _ = try device.cairn(["sync"])
        try await waitUntil("the state is saved", seconds: 60) { installedInState() == 2 }
    }

    @Test("Given a USB stick (a small file system) without room for a version, then cairn export fails with disk_full in one line giving what it needs and what is free, before writing anything, and the device keeps answering; with room, the same export succeeds")
    func exportFills() async throws {
        let disk = try Tmpfs(megabytes: 8)
        defer { disk.unmount() }
        let rig = try await Rig()
        defer { rig.stop() }
        let target = disk.path + "/usb"
        // Room for the folders and the small files, not for the snapshot blob and the model.
        disk.fill(leaving: 16 << 10)
        let full = try rig.device.cairn(["export", "--to", target])
        #expect(full.status == 1)
        let line = full.error.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(line.hasSuffix("(disk_full)") && line.contains("the export needs") && line.contains("free; free some space")
                && line.contains("nothing was written") && !line.contains("\n"), "\(full.error)")
        #expect(!FileManager.default.fileExists(atPath: target))
        #expect(rig.wrongAnswer(expecting: rig.version) == nil)

        disk.emptyFiller()
        #expect(try rig.device.cairn(["export", "--to", target]).status == 0)
        #expect(FileManager.default.fileExists(atPath: target + "/channels"))
    }

    @Test("Given a version installed by a delta (its snapshot must be rebuilt to export it) and a data disk without room for the rebuild, then export is refused with disk_full in one line before writing, the device keeps answering, and with room the export succeeds")
    func exportRebuildNeedsRoom() async throws {
        try await Self.onTmpfs(megabytes: 160) { disk, rig in
            let version = try rig.publishNext()
            #expect(try await ProgressTests.syncWait(rig).status == 0)
            #expect(rig.wrongAnswer(expecting: version) == nil)
            let target = try TemporaryDirectory.make() + "/usb"
            disk.fill(leaving: 32 << 20)  // below the rebuild's files and the 64 MiB an install keeps
            let full = try rig.device.cairn(["export", "--to", target])
            #expect(full.status == 1)
            let line = full.error.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(line.contains("rebuilding version \(version)'s snapshot") && line.hasSuffix("(disk_full)") && !line.contains("\n"),
                    "\(full.error)")
            #expect(!FileManager.default.fileExists(atPath: target + "/channels"))
            #expect(rig.wrongAnswer(expecting: version) == nil)

            disk.emptyFiller()
            let exported = try rig.device.cairn(["export", "--to", target, "--json"])
            #expect(exported.status == 0, "\(exported.error)")
            #expect(exported.output.contains("rebuilt"), "\(exported.output)")
        }
    }

    /// `mount` with `arguments`, which must succeed.
    static func mount(_ arguments: [String]) throws {
        let run = try Binaries.run("/bin/mount", arguments, in: "/tmp")
        try #require(run.status == 0, "mount \(arguments): \(run.error)")
    }

    /// A folder made under /run/media (`media`) and one in it for a stick (`stick`), both removed
    /// after `body`, a file system mounted on `stick` unmounted.
    static func withMediaFolder(_ body: (_ media: String, _ stick: String) async throws -> Void) async throws {
        let media = "/run/media/cairn-test-\(UUID().uuidString.prefix(8))"
        let stick = media + "/STICK"
        try FileManager.default.createDirectory(atPath: stick, withIntermediateDirectories: true)
        defer {
            _ = try? Binaries.run("/bin/umount", ["-l", stick], in: "/tmp")
            try? FileManager.default.removeItem(atPath: media)
        }
        try await body(media, stick)
    }

    @Test("Given cairn export to a stick mounted read-only, or seen read-only through a read-only bind mount of a writable file system (as ProtectSystem=strict shows cairnd a folder outside ReadWritePaths=), then it is refused with bad_path naming the cause and the fix, before anything is written; mounted read-write, the same export succeeds")
    func exportToReadOnlyStick() async throws {
        try Tools.requireMount("mount a tmpfs under /run/media read-only")
        try await Self.withMediaFolder { _, stick in
            let rig = try await Rig()
            defer { rig.stop() }
            let target = stick + "/cairn"
            // Until 2026-12-07 both were export_failed, "cannot write …: Read-only file system".
            try Self.mount(["-t", "tmpfs", "-o", "size=64m,ro", "tmpfs", stick])
            let readOnly = try rig.device.cairn(["export", "--to", target])
            #expect(readOnly.status == 1 && readOnly.error.contains("is on a file system mounted read-only at \(stick)")
                    && readOnly.error.contains("(bad_path)"), "\(readOnly.status) \(readOnly.error)")
            try Self.mount(["-o", "remount,rw", stick])
            try Self.mount(["--bind", stick, stick])
            try Self.mount(["-o", "remount,bind,ro", stick])
            let view = try rig.device.cairn(["export", "--to", target])
            #expect(view.status == 1 && view.error.contains("ReadWritePaths=") && view.error.contains("(bad_path)"), "\(view.status) \(view.error)")
            #expect(!FileManager.default.fileExists(atPath: target))
            _ = try Binaries.run("/bin/umount", [stick], in: "/tmp")  // the view; the tmpfs stays
            let exported = try rig.device.cairn(["export", "--to", target])
            #expect(exported.status == 0, "\(exported.error)")
        }
    }

    @Test("Given cairn export to a folder under /run/media where no stick is mounted (the folder is on the device's own disk), then it is refused with bad_path saying nothing is mounted there, and nothing is written; with a file system mounted there, the same export succeeds")
    func exportToUnmountedStick() async throws {
        try Tools.requireMount("make a folder under /run/media and mount a tmpfs there")
        try await Self.withMediaFolder { _, stick in
            let rig = try await Rig()
            defer { rig.stop() }
            let target = stick + "/cairn"
            let refused = try rig.device.cairn(["export", "--to", target])
            #expect(refused.status == 1 && refused.error.contains("nothing is mounted at \(target)") && refused.error.contains("(bad_path)"),
                    "\(refused.status) \(refused.error)")
            #expect(!FileManager.default.fileExists(atPath: target))
            try Self.mount(["-t", "tmpfs", "-o", "size=64m", "tmpfs", stick])
            let exported = try rig.device.cairn(["export", "--to", target])
            #expect(exported.status == 0, "\(exported.error)")
            #expect(FileManager.default.fileExists(atPath: target + "/channels"))
        }
    }

    @Test("Given a stick mounted below a folder only another user may enter (a desktop's /run/media/USER), when it is exported to, then the export is refused as bad_path naming that folder and cairnd's user, not as a folder nothing is mounted at, and nothing is written; with access given, it succeeds")
    func exportBelowAFolderCairndMayNotEnter() async throws {
        try Tools.requireMount("mount a tmpfs under /run/media and run cairnd without CAP_DAC_OVERRIDE")
        let (uid, gid) = try await SystemUsers.ensure(user: SystemUsers.outsider)
        try await Self.withMediaFolder { media, stick in
            try Self.mount(["-t", "tmpfs", "-o", "size=64m,mode=0755,uid=\(uid),gid=\(gid)", "tmpfs", stick])
            // As udisks leaves it for a desktop's user: that user's, entered by no one else.
            try #require(chown(media, uid, gid) == 0 && chmod(media, 0o700) == 0)
            // cairnd as root without the capabilities that pass file modes by: as cairnd
            // running as its own user meets the folder.
            let rig = try await Rig(wrapper: ["/usr/bin/setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"])
            defer { rig.stop() }
            let target = stick + "/cairn"
            let refused = try rig.device.cairn(["export", "--to", target])
            #expect(refused.status == 1 && refused.error.contains("may not write into \(media) (permission denied)")
                    && refused.error.contains("(user root)") && refused.error.contains("(bad_path)")
                    && !refused.error.contains("nothing is mounted"), "\(refused.status) \(refused.error)")
            #expect(!FileManager.default.fileExists(atPath: target))
            // The stick's own root is still the desktop user's, entered by anyone but written
            // by that user alone.
            try #require(chmod(media, 0o755) == 0)
            let stickRoot = try rig.device.cairn(["export", "--to", target])
            #expect(stickRoot.status == 1 && stickRoot.error.contains("may not write into \(stick) (permission denied)"), "\(stickRoot.error)")
            try #require(chmod(stick, 0o777) == 0)
            let exported = try rig.device.cairn(["export", "--to", target])
            #expect(exported.status == 0, "\(exported.error)")
            #expect(FileManager.default.fileExists(atPath: target + "/channels"))
        }
    }

    @Test("Given the data directory remounted read-only, then the attempt is refused with a reason in status and succeeds once it is writable")
    func readOnly() async throws {
        try await Self.onTmpfs(megabytes: 80) { disk, rig in
            let report = FaultReport("data directory read-only")
            var reason = ""
            for number in 1...2 {
                await report.trial(number) {
                    let old = rig.version
                    let new = try rig.publishNext()
                    try disk.remount("ro")
                    // state.json cannot be written either: the status still says why (from memory).
                    let before = rig.device.syncStatus["last_attempt"] as? String
                    _ = try rig.device.cairn(["sync"])
                    try await waitUntil("the refusal shows in status", seconds: 60) {
                        let sync = rig.device.syncStatus
                        return sync["last_error"] is String && (sync["last_attempt"] as? String != before || before == nil)
                    }
                    reason = rig.device.syncStatus["last_error"] as? String ?? ""
                    if reason.contains("\n") { return "last_error is not one line" }
                    if let wrong = rig.wrongAnswer(expecting: old) { return wrong }
                    try disk.remount("rw")
                    return try await rig.recovery(to: new)
                }
            }
            #expect(report.finish("refused: \(reason.prefix(80)); old version answering; installed once writable"))
        }
    }

    @Test("Given versions 1 and 2 installed and the data directory remounted read-only, or full, when cairn rollback runs, then it fails with one line saying version 1 cannot be checked (not that it is damaged); on a full disk it fails too; each time version 2 keeps serving and status holds nothing back; with room again, the rollback goes through")
    func rollbackOnReadOnlyDisk() async throws {
        try await Self.onTmpfs(megabytes: 80) { disk, rig in
            let new = try rig.publishNext()
            if let problem = try await rig.recovery(to: new) { Issue.record("\(problem)") }
            try disk.remount("ro")
            let refused = try rig.device.cairn(["rollback"])
            #expect(refused.status != 0 && refused.error.split(separator: "\n").count == 1, "\(refused.status) \(refused.error)")
            // Version 1's check could not run (FTS5's is a write statement): that is no damage.
            // Before 2026-12-06 it was said as "the full-text index does not match its chunks".
            #expect(refused.error.contains("cannot be checked") && !refused.error.contains("does not match"), "\(refused.error)")
            #expect(rig.device.syncStatus["held_back_version"] is NSNull, "\(rig.device.syncStatus)")
            if let wrong = rig.wrongAnswer(expecting: new) { Issue.record("\(wrong)") }
            try disk.remount("rw")
            // A full disk: version 1 checks, and state.json cannot be written.
            disk.fill(leaving: 0)
            let full = try rig.device.cairn(["rollback"])
            disk.emptyFiller()
            #expect(full.status != 0 && full.error.split(separator: "\n").count == 1 && full.error.contains("state.json"),
                    "\(full.status) \(full.error)")
            // Before 2026-12-06 the state kept in memory (state.json cannot be written) said
            // version 2 was held back, though nothing had been rolled back.
            #expect(rig.device.syncStatus["held_back_version"] is NSNull, "\(full.error) \(rig.device.syncStatus)")
            if let wrong = rig.wrongAnswer(expecting: new) { Issue.record("\(wrong)") }
            let rolled = try rig.device.cairn(["rollback"])
            #expect(rolled.status == 0, "\(rolled.error)")
            #expect(rig.device.syncStatus["held_back_version"] as? Int == new)
        }
    }

    @Test("Given an installed version and its data directory remounted read-only (an SD card the kernel remounted after errors), when cairnd restarts, then it serves that version and says the directory is read-only, a sync fails saying so, and once writable the next version installs")
    func readOnlyAtStartup() async throws {
        try await Self.onTmpfs(megabytes: 80) { disk, rig in
            let data = rig.device.dataDirectory
            rig.device.stop()
            try disk.remount("ro")
            // Before 2026-12-06 cairnd exited 1 ("give this user write access to it (chown)"),
            // and its supervisor restarted it for ever, the device answering nothing.
            let device = try DeviceProcess(rig.workspace, sources: [rig.server.url], name: "read-only", dataDirectory: data)
            defer { device.stop() }
            try await device.waitForVersion(1)
            #expect(try device.query("boil water").version == 1)
            #expect(device.log.contains("on a read-only file system"), "\(device.log)")
            let new = try rig.publishNext()
            let waited = try device.cairn(["sync", "--wait"])
            #expect(waited.status != 0 && waited.error.contains("Read-only file system"), "\(waited.status) \(waited.error)")
            #expect(try device.query("boil water").version == 1)
            try disk.remount("rw")
            #expect(try device.cairn(["sync", "--wait"]).status == 0)
            try await device.waitForVersion(new)
        }
    }

    @Test("Given an installed version whose rows files cannot be mapped at start-up (no memory, as a small device's limit gives at a million rows), when cairnd starts, then it keeps the version (its links and folder unchanged) and says why nothing answers, not a scan of every row and then the version dropped as damaged; with memory back, it serves it")
    func rowsCannotBeMappedAtStartup() async throws {
        let rig = try await Rig()
        defer { rig.stop() }
        let data = rig.device.dataDirectory
        func current() -> String? { try? FileManager.default.destinationOfSymbolicLink(atPath: data + "/current") }
        let installed = try #require(current())
        rig.device.stop()
        // The one mock here: CAIRN_TEST_ROWS_MAP_FAILS makes mmap of a rows file fail with
        // ENOMEM. A test cannot run cairnd out of memory at that one call on time (a lower
        // RLIMIT_AS fails earlier steps first).
        let failing = try DeviceProcess(rig.workspace, sources: [rig.server.url], name: "no-memory", dataDirectory: data,
                                        environment: ["CAIRN_TEST_ROWS_MAP_FAILS": "1"])
        defer { failing.stop() }
        try await waitUntil("cairnd answers status", seconds: 60) { failing.status()["sync"] != nil }
        #expect(failing.log.contains("cannot be opened now; it is kept"), "\(failing.log)")
        #expect((failing.status()["not_serving"] as? String)?.contains("cannot be mapped now") == true, "\(failing.status())")
        // Until 2026-12-07: the rows were scanned anew, their new file failed to map as
        // "malformed", and `current` was dropped for a sync to install the version again.
        #expect(current() == installed && FileManager.default.fileExists(atPath: data + "/" + installed))
        failing.stop()
        let again = try DeviceProcess(rig.workspace, sources: [rig.server.url], name: "memory-back", dataDirectory: data)
        defer { again.stop() }
        try await again.waitForVersion(1)
        #expect(current() == installed)
    }

    @Test("Given a new version whose rows file cannot be mapped during its install (no memory), by delta or by snapshot, then the attempt fails as the device's own (io, the source still healthy), a delta does not fall back to downloading the snapshot, the old version answers, and with memory back the version installs",
          arguments: ["delta", "snapshot"])
    func rowsCannotBeMappedDuringInstall(path: String) async throws {
        // The one mock here, as in rowsCannotBeMappedAtStartup: mmap of a rows file fails with
        // ENOMEM while the file `flag` exists (cairnd must start, and map version 1, first).
        let flag = try TemporaryDirectory.make() + "/no-memory"
        let rig = try await Rig(environment: ["CAIRN_TEST_ROWS_MAP_FAILS": flag])
        defer { rig.stop() }
        let new = try rig.publishNext()
        if path == "snapshot" { try rig.tamperManifest { $0.deltas = [] } }
        let snapshot = try #require(rig.currentBlobs().last).sha
        let asked = rig.server.requests.count
        FileManager.default.createFile(atPath: flag, contents: nil)
        let outcome = try await rig.syncAttempt()
        if let problem = rig.refusal(outcome, codes: ["io"], old: 1) { Issue.record("\(problem)") }
        #expect(outcome?.message.contains("cannot be mapped now") == true, "\(String(describing: outcome))")
        let source = (rig.device.syncStatus["sources"] as? [[String: Any]])?.first ?? [:]
        #expect(source["healthy"] as? Bool == true && source["failures_in_a_row"] as? Int == 0, "\(source)")
        if path == "delta" {
            #expect(!rig.device.log.contains("falling back to the full snapshot"))
            #expect(!rig.server.requests.dropFirst(asked).contains { $0.path.contains(snapshot) })
        }
        try FileManager.default.removeItem(atPath: flag)
        if let problem = try await rig.recovery(to: new) { Issue.record("\(problem)") }
        if path == "delta" { #expect(!rig.server.requests.dropFirst(asked).contains { $0.path.contains(snapshot) }) }
    }

    @Test("Given versions 1 and 2 installed, version 2's manifest damaged and the data directory read-only, when cairnd restarts, then it starts and version 1 serves (the links unchanged), not an exit and restarts for ever")
    func readOnlyWithUnreadableCurrent() async throws {
        try await Self.onTmpfs(megabytes: 80) { disk, rig in
            let new = try rig.publishNext()
            if let problem = try await rig.recovery(to: new) { Issue.record("\(problem)") }
            let data = rig.device.dataDirectory
            rig.device.stop()
            try Data("{".utf8).write(to: URL(fileURLWithPath: data + "/versions/\(new)/manifest.json"))
            try disk.remount("ro")
            defer { try? disk.remount("rw") }
            let device = try DeviceProcess(rig.workspace, sources: [rig.server.url], name: "read-only-damaged", dataDirectory: data)
            defer { device.stop() }
            try await waitUntil("cairnd answers", seconds: 60) { (try? device.query("release notes edition", mode: "lexical")) != nil }
            let answer = try device.query("release notes edition", mode: "lexical")
            #expect(answer.version == 1 && answer.ids == ["release-1"], "\(answer)")
            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: data + "/current") == "versions/\(new)")
        }
    }

    @Test("Given a version cairnd cannot read now (its manifest or its folder: EACCES, as a failing card's EIO), when cairnd restarts, then no version is dropped: a current one is kept with every link while the previous one serves, and serves at the next sync once it reads; a previous one keeps its link and folder, and rollback works once it reads")
    func versionUnreadableAtStartup() async throws {
        // A real EACCES: cairnd as root loses the capabilities that pass file modes by (as
        // cairnd under its own user meets a file it may not read); a user needs nothing.
        let wrapper = getuid() == 0 ? ["/usr/bin/setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"] : []
        let rig = try await Rig(wrapper: wrapper)
        defer { rig.stop() }
        let new = try rig.publishNext()
        if let problem = try await rig.recovery(to: new) { Issue.record("\(problem)") }
        let data = rig.device.dataDirectory
        func link(_ name: String) -> String? { try? FileManager.default.destinationOfSymbolicLink(atPath: data + "/" + name) }
        func mode(_ item: String, _ mode: mode_t) throws { try #require(chmod(data + "/versions/" + item, mode) == 0) }
        rig.device.stop()

        // The source down: a sync finds nothing to install, so only a read again serves version 2.
        rig.server.kill()
        try mode("\(new)/manifest.json", 0)
        let keptCurrent = try DeviceProcess(rig.workspace, sources: [rig.server.url], name: "current-unreadable", dataDirectory: data,
                                            wrapper: wrapper)
        try await keptCurrent.waitForVersion(1)
        #expect(link("current") == "versions/\(new)" && link("previous") == "versions/1")
        #expect(FileManager.default.fileExists(atPath: data + "/versions/\(new)/index.sqlite"))
        #expect(keptCurrent.log.contains("the current version cannot be read now; it is kept with every link"), "\(keptCurrent.log)")
        try mode("\(new)/manifest.json", 0o644)
        _ = try keptCurrent.cairn(["sync"])
        try await keptCurrent.waitForVersion(new)
        keptCurrent.stop()

        // The previous version's folder: its index cannot even be looked up. No source: a sync
        // would install again what start-up dropped.
        try mode("1", 0)
        let keptPrevious = try DeviceProcess(rig.workspace, sources: [], name: "previous-unreadable", dataDirectory: data, wrapper: wrapper)
        defer { keptPrevious.stop() }
        try await keptPrevious.waitForVersion(new)
        #expect(link("current") == "versions/\(new)" && link("previous") == "versions/1")
        #expect(FileManager.default.fileExists(atPath: data + "/versions/1/index.sqlite"))
        #expect(keptPrevious.log.contains("the previous version cannot be read now; it is kept"), "\(keptPrevious.log)")
        try mode("1", 0o755)
        let rolled = try keptPrevious.cairn(["rollback"])
        #expect(rolled.status == 0, "\(rolled.error)")
        try await keptPrevious.waitForVersion(1)
    }

    @Test("Given version 2's manifest damaged and the links unable to change at start-up (a real failing link edit: a folder where the new link is made), when cairnd restarts, then it starts and version 1 serves with the links as they were, and falls back for good once they can change")
    func linksCannotChangeAtStartup() async throws {
        let rig = try await Rig()
        defer { rig.stop() }
        let new = try rig.publishNext()
        if let problem = try await rig.recovery(to: new) { Issue.record("\(problem)") }
        let data = rig.device.dataDirectory
        func link(_ name: String) -> String? { try? FileManager.default.destinationOfSymbolicLink(atPath: data + "/" + name) }
        rig.device.stop()
        try Data("{".utf8).write(to: URL(fileURLWithPath: data + "/versions/\(new)/manifest.json"))
        // `replaceLink` makes `current.tmp` and renames it over `current`: with a folder there,
        // unlink fails and symlink meets EEXIST, as an edit meets EIO on a failing card.
        try FileManager.default.createDirectory(atPath: data + "/current.tmp", withIntermediateDirectories: false)
        let stuck = try DeviceProcess(rig.workspace, sources: [], name: "links-stuck", dataDirectory: data)
        try await stuck.waitForVersion(1)
        #expect(link("current") == "versions/\(new)" && link("previous") == "versions/1")
        #expect(stuck.log.contains("the data directory's links cannot be changed now"), "\(stuck.log)")
        stuck.stop()
        try FileManager.default.removeItem(atPath: data + "/current.tmp")
        let mended = try DeviceProcess(rig.workspace, sources: [], name: "links-mended", dataDirectory: data)
        defer { mended.stop() }
        try await mended.waitForVersion(1)
        #expect(link("current") == "versions/1" && link("previous") == nil)
    }

    @Test("Given a full disk at start-up and installed versions whose rows files must be written again, then cairnd keeps every version (in a temporary folder when it has room, serving at once; else serving nothing for now) and serves the installed one once space returns",
          arguments: [true, false])
    func fullDiskAtStartup(temporaryOnFullDisk: Bool) async throws {
        let disk = try Tmpfs(megabytes: 80)
        defer { disk.unmount() }
        guard let (rig, temporary) = try await Self.twoVersionsStopped(on: disk, dropRowsOf: temporaryOnFullDisk ? ["1", "2"] : ["2"])
        else { return }
        defer { rig.stop() }
        let data = rig.device.dataDirectory
        func link(_ name: String) -> String? { try? FileManager.default.destinationOfSymbolicLink(atPath: data + "/" + name) }
        disk.fill(leaving: 0)
        defer { disk.emptyFiller() }
        let notify = try NotifySocket(path: try TemporaryDirectory.make() + "/notify.sock")
        defer { notify.close() }
        let device = try DeviceProcess(rig.workspace, sources: [rig.server.url], name: "restarted", dataDirectory: data,
                                       environment: ["NOTIFY_SOCKET": notify.path].merging(temporaryOnFullDisk ? ["TMPDIR": temporary] : [:]) { $1 })
        defer { device.stop() }
        if temporaryOnFullDisk {
            try await waitUntil("cairnd answers status", seconds: 60) { device.status()["sync"] != nil }
            #expect(device.log.contains("cannot be opened now; it is kept"))
            #expect(device.status()["version"] as? Int == nil)
            #expect((device.status()["not_serving"] as? String)?.contains("version 2 is installed but cannot be opened now") == true)
            // Installed, though not served (until 2026-12-07: false, as before a first install).
            #expect(device.status()["installed"] as? Bool == true)
            #expect(try device.cairn(["status"]).output.contains("none answering: version 2 is installed but cannot be opened now"))
            // A caller is told why nothing answers, not "nothing installed yet".
            let query = try device.cairn(["query", "release notes edition", "--mode", "lexical"])
            #expect(query.status != 0 && query.error.contains("version 2 is installed but cannot be opened now")
                    && query.error.contains("(no_index)"), "\(query.status) \(query.error)")
            // The service manager is not told that queries are answered, and an attempt whose
            // source has nothing newer fails with the reason (state.json, status, back-off)
            // instead of "up to date".
            #expect(notify.messages.contains { $0.hasPrefix("READY=1\nSTATUS=not answering queries: version 2 is installed") },
                    "\(notify.messages)")
            let sync = try device.cairn(["sync", "--wait", "--timeout", "60"])
            #expect(sync.status == 1, "\(sync)")
            #expect((device.syncStatus["last_error"] as? String)?.contains("version 2 is installed but cannot be opened now") == true,
                    "\(device.syncStatus)")
            #expect(device.syncStatus["last_error_code"] as? String == "install_failed")
            #expect(notify.messages.contains { $0.hasPrefix("STATUS=sync failed (install_failed: version 2 is installed but cannot be opened now")
                                               && $0.hasSuffix("; not answering queries") }, "\(notify.messages)")
        } else {
            try await device.waitForVersion(2)
        }
        // Nothing was discarded for want of space.
        #expect(link("current") == "versions/2" && link("previous") == "versions/1")
        #expect(FileManager.default.fileExists(atPath: data + "/versions/2/index.sqlite"))
        #expect(FileManager.default.fileExists(atPath: data + "/versions/1/index.sqlite"))
        disk.emptyFiller()
        _ = try device.cairn(["sync"])
        try await device.waitForVersion(2)
        #expect(try device.query("release notes edition", mode: "lexical").ids.first == "release-2")
        #expect(device.status()["not_serving"] is NSNull)
    }
}
