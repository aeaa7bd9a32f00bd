import CairnCore
import CairnStore
import CairnSync
import CairnTestSupport
import Foundation
import Testing

/// `max_disk_bytes`: an install needs at most the new version beside the live one; the previous
/// version is kept for rollback only while an install fits the budget. Real cairnd processes
/// restarted on one data directory with different budgets, against the fault server (no faults).
@Suite("Disk budget: max_disk_bytes (real processes)", .offCooperativePool, .serialized)
struct DiskBudgetTests {
    /// What the budget counts: versions, models and staging.
    static func content(_ data: String) -> Int64 {
        ["versions", "models", "staging"].reduce(0) { $0 + DiskUsage.bytes(under: data + "/" + $1) }
    }

    static func versions(_ data: String) -> Set<String> {
        Set(((try? FileManager.default.contentsOfDirectory(atPath: data + "/versions")) ?? []))
    }

    /// A cairnd on `data` under `budget` that waits until the version installed before it
    /// serves (`serving`), then runs `cairn sync --wait`, which must succeed. Stop it when done.
    static func syncUnderBudget(_ rig: Rig, name: String, budget: Int64, data: String, serving: Int) async throws -> DeviceProcess {
        let device = try DeviceProcess(rig.workspace, sources: [rig.server.url], name: name,
                                       config: ["max_disk_bytes": String(budget)], dataDirectory: data)
        do {
            try await waitUntil("cairnd answers", seconds: 60) { (device.status()["version"] as? Int ?? 0) >= serving }
            let waited = try device.cairn(["sync", "--wait"])
            #expect(waited.status == 0, "\(waited.error)")
        } catch {
            device.stop()
            throw error
        }
        return device
    }

    @Test("Given a budget that holds the live and a new version but not the previous as well, when a version arrives, then the previous is removed before the download and the install succeeds, by the full snapshot when the delta's result would pass the budget; given one the new version cannot fit, then disk_budget, nothing downloaded, and the live version answers")
    func budget() async throws {
        let data = try TemporaryDirectory.make() + "/device"
        let rig = try await Rig(dataDirectory: data)
        defer { rig.stop() }
        // Without a budget: versions 2 and 3 (each with 100,000 bytes of random words) install,
        // and the device keeps version 2 for rollback beside version 3.
        for _ in 0..<2 {
            let version = try rig.publishNext(bulk: 100_000)
            #expect(try await ProgressTests.syncWait(rig).status == 0)
            #expect(rig.wrongAnswer(expecting: version) == nil)
        }
        rig.device.stop()
        #expect(Self.versions(data) == ["2", "3"])
        // Without version 3's kept delta (as on a device from before 2026-11-22, which kept
        // none), version 2's index cannot be brought up to date for the next delta to apply in
        // place (`inPlaceCountsNoCopy`): that delta copies version 3's index.
        try FileManager.default.removeItem(atPath: data + "/versions/3/" + DataDirectoryLayout.deltaBlobFile)
        let (used, live) = (Self.content(data), DiskUsage.bytes(under: data + "/versions/3"))
        try rig.publishNext(bulk: 100_000)

        // A budget with room for what is there plus one more version of the live one's size: an
        // install of version 4 (its index copied from version 3, plus the delta) needs more than
        // that beside version 2, and less once version 2 is gone.
        let budget = used + live
        let fits = try DeviceProcess(rig.workspace, sources: [rig.server.url], name: "fits",
                                     config: ["max_disk_bytes": String(budget)], dataDirectory: data)
        defer { fits.stop() }
        // cairnd syncs as it starts: the attempt that installs version 4 may be that one or the
        // one `sync --wait` asks for (which then finds it the newest).
        try await waitUntil("cairnd answers", seconds: 60) { (fits.status()["version"] as? Int ?? 0) >= 3 }
        #expect(fits.syncStatus["max_disk_bytes"] as? Int == Int(budget))
        let waited = try fits.cairn(["sync", "--wait"])
        #expect(waited.status == 0, "\(waited.error)")
        let answer = try fits.query("release notes edition", mode: "lexical")
        #expect(answer.version == 4 && answer.ids == ["release-4"])
        let log = fits.log
        // The estimate counts the delta's growth of the index as its size, but applying it merges
        // the full-text segments the earlier deltas left, and the file grows past the budget: the
        // result is refused and the full snapshot installed instead.
        #expect(log.contains("the delta's result leaves") && log.contains("falling back to the full snapshot"), "\(log)")
        #expect(log.contains("cairn.sync.path=full"), "\(log)")
        let removed = try #require(log.range(of: "removed previous version 2 to make room for version 4 (max_disk_bytes)"), "\(log)")
        let installed = try #require(log.range(of: "cairn.sync.version=4 [CairnSync] installed version"), "\(log)")
        #expect(removed.lowerBound < installed.lowerBound, "the previous version goes before the install, not after")
        #expect(Self.versions(data) == ["3", "4"])
        #expect(Self.content(data) <= budget)
        let status = fits.syncStatus
        #expect(status["previous_version"] as? Int == 3 && status["previous_dropped"] as? Int == 2)
        #expect(try fits.cairn(["status"]).output.contains("rollback    to version 3 (max_disk_bytes \(budget))"))
        fits.stop()  // before the next cairnd takes the data directory (the defer is then a no-op)

        // A budget below what the live and previous versions hold now: the previous goes, and the
        // next version still does not fit beside the live one. What is left beside it is 100,000
        // bytes, less than either path needs: a copy of the live index, or the snapshot's (each
        // about 300,000 bytes here).
        try rig.publishNext(bulk: 100_000)
        let tight = Self.content(data) - DiskUsage.bytes(under: data + "/versions/3") + 100_000
        let small = try DeviceProcess(rig.workspace, sources: [rig.server.url], name: "small",
                                      config: ["max_disk_bytes": String(tight)], dataDirectory: data)
        defer { small.stop() }
        try await small.waitForVersion(4)  // and stays there: version 5 does not fit
        let refused = try small.cairn(["sync", "--wait"])
        #expect(refused.status == 1)
        #expect(refused.error.contains("sync failed (disk_budget): version 5 needs ") && refused.error.contains("max_disk_bytes is \(tight)"),
                "\(refused.error)")
        let after = small.syncStatus
        #expect(after["last_error_code"] as? String == "disk_budget")
        #expect(after["previous_version"] is NSNull && after["previous_dropped"] as? Int == 3)
        #expect(try small.cairn(["status"]).output.contains("rollback    none: version 3 was removed to make room for an install"))
        #expect(try small.query("release notes edition", mode: "lexical").ids == ["release-4"])
        #expect(Self.versions(data) == ["4"])
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: data + "/staging")) ?? []).isEmpty, "nothing was downloaded")
        let rollback = try small.cairn(["rollback"])
        #expect(rollback.status == 5)
        small.stop()
    }

    /// `modelChanged`: the new version's model has another config.json under the same id (the
    /// delta path is still taken, and its new model folder is fetched before the delta fails).
    @Test("Given a budget that holds a delta beside the live and previous versions but holds the full snapshot only without the previous, when every delta blob is corrupt, then the install falls back to the snapshot, the previous version is removed to make room for it (never the new version's model, fetched already), and the new version answers",
          arguments: [false, true])
    func fallbackMakesRoom(modelChanged: Bool) async throws {
        let data = try TemporaryDirectory.make() + "/device"
        let rig = try await Rig(dataDirectory: data)
        defer { rig.stop() }
        // A chunk every version keeps: each snapshot carries its 100,000 bytes, no delta does.
        let manual: Workspace.KB = [("manual", Rig.randomWords(bytes: 100_000))]
        for _ in 0..<2 {
            let version = try rig.publishNext(adding: manual)
            #expect(try await ProgressTests.syncWait(rig).status == 0)
            #expect(rig.wrongAnswer(expecting: version) == nil)
        }
        rig.device.stop()
        #expect(Self.versions(data) == ["2", "3"])
        if modelChanged {
            let config = rig.workspace.model + "/config.json"
            try (try String(contentsOfFile: config, encoding: .utf8) + "\n").write(toFile: config, atomically: true, encoding: .utf8)
        }
        try rig.publishNext(adding: manual)

        // What the install estimates for each path (no spare: the delta counts a copy of the live
        // index), and a budget between the two beside what the device holds.
        let manifest = try rig.currentManifest()
        let ref = try #require(manifest.deltas.first { $0.fromVersion == 3 })
        let liveIndex = try #require(try FileManager.default.attributesOfItem(
            atPath: data + "/versions/3/" + DataDirectoryLayout.indexFile)[.size] as? Int)
        func estimate(_ path: SyncPlanner.Path, copying: Int) -> Int64 {
            SyncPlanner.requiredBytes(path: path, alreadyStaged: 0, currentIndexSize: Int64(copying),
                                      rowsBytes: SyncPlanner.rowsBytes(path: path, chunks: manifest.chunkCount, dimension: manifest.dimension),
                                      missingModelBytes: 0, margin: 0)
        }
        let (byDelta, byFull) = (estimate(.delta(ref), copying: liveIndex), estimate(.full(manifest.snapshot), copying: 0))
        let (used, previous) = (Self.content(data), DiskUsage.bytes(under: data + "/versions/2"))
        try #require(byFull - byDelta > 40_000 && previous > byFull - byDelta,
                     "no budget tells the paths apart: delta \(byDelta), snapshot \(byFull), previous version \(previous) bytes")
        let budget = used + (byDelta + byFull) / 2

        // A mirror whose delta blobs are corrupt (bytes inverted): each fails its hash once
        // downloaded, after the budget let the delta in with the previous version kept.
        for delta in manifest.deltas {
            let file = BlobStore(root: rig.workspace.repo).path(of: delta.sha256)
            let inverted = Data(try Data(contentsOf: URL(fileURLWithPath: file)).map { ~$0 })
            try FileManager.default.removeItem(atPath: file)
            try inverted.write(to: URL(fileURLWithPath: file))
        }
        let device = try await Self.syncUnderBudget(rig, name: "fallback", budget: budget, data: data, serving: 3)
        defer { device.stop() }
        let answer = try device.query("release notes edition", mode: "lexical")
        #expect(answer.version == 4 && answer.ids == ["release-4"])
        let log = device.log
        let fallback = try #require(log.range(of: "falling back to the full snapshot"), "\(log)")
        let removed = try #require(log.range(of: "removed previous version 2 to make room for version 4 (max_disk_bytes)"), "\(log)")
        #expect(fallback.lowerBound < removed.lowerBound, "the delta path kept the previous version; the fallback removed it")
        #expect(log.contains("hash_mismatch") || log.contains("hashMismatch"), "\(log)")
        #expect(log.contains("cairn.sync.path=full"), "\(log)")
        #expect(Self.versions(data) == ["3", "4"])
        #expect(Self.content(data) <= budget)
        let status = device.syncStatus
        #expect(status["previous_version"] as? Int == 3 && status["previous_dropped"] as? Int == 2)
        #expect(FileManager.default.fileExists(atPath: data + "/versions/4/" + DataDirectoryLayout.modelLink + "/model.safetensors"),
                "version 4's model is gone")
        #expect(try device.query("release notes edition", mode: "dense").version == 4)
    }

    @Test("Given a budget that holds a delta applied in place to the previous version's index but not one applied to a copy of the live index, when the next delta arrives, then it is applied in place and the previous version is not removed first; with the kept delta that brings the previous index up torn (a power cut), the copy is counted: the previous version goes first, and the delta is applied to a copy rather than refused after it",
          arguments: [false, true])
    func inPlaceCountsNoCopy(keptDeltaTorn: Bool) async throws {
        let data = try TemporaryDirectory.make() + "/device"
        let rig = try await Rig(dataDirectory: data)
        defer { rig.stop() }
        // Version 2 by delta (a copy of version 1's index): version 1 stays as previous, and
        // version 2's folder keeps its delta, which brings version 1's index up to date.
        try rig.publishNext()
        #expect(try await ProgressTests.syncWait(rig).status == 0)
        rig.device.stop()
        let kept = data + "/versions/2/" + DataDirectoryLayout.deltaBlobFile
        try #require(FileManager.default.fileExists(atPath: kept))
        try #require(!FileManager.default.fileExists(atPath: data + "/versions/2/" + DataDirectoryLayout.spareIndexFile))
        #expect(Self.versions(data) == ["1", "2"])
        if keptDeltaTorn {
            // Its last byte changed: the size a power cut may leave, not the bytes.
            let handle = try FileHandle(forUpdating: URL(fileURLWithPath: kept))
            let end = try handle.seekToEnd() - 1
            try handle.seek(toOffset: end)
            let last = try #require(try handle.read(upToCount: 1)?.first)
            try handle.seek(toOffset: end)
            try handle.write(contentsOf: [last ^ 0xFF])
            try handle.close()
        }
        let version = try rig.publishNext()

        // What version 3's delta needs when it copies the live index, and when it moves the
        // previous one's (counting version 2's kept delta, inflated beside it and applied to
        // it): the budget lies halfway between, beside what the device holds.
        let manifest = try rig.currentManifest()
        let ref = try #require(manifest.deltas.first { $0.fromVersion == 2 })
        // Version 2's manifest names the delta from version 1 its folder keeps.
        let installed = try SignedManifest.decodeEnvelope(Array(Data(contentsOf: URL(fileURLWithPath: data + "/versions/2/manifest.json"))))
        let keptRef = try #require(try Manifest(json: installed.content).deltas.first { $0.fromVersion == 1 })
        let live = try #require(try FileManager.default.attributesOfItem(
            atPath: data + "/versions/2/" + DataDirectoryLayout.indexFile)[.size] as? Int)
        func estimate(copying: Int) -> Int64 {
            SyncPlanner.requiredBytes(path: .delta(ref), alreadyStaged: 0, currentIndexSize: Int64(copying),
                                      rowsBytes: SyncPlanner.rowsBytes(path: .delta(ref), chunks: manifest.chunkCount, dimension: manifest.dimension),
                                      missingModelBytes: 0, margin: 0)
        }
        let budget = Self.content(data) + (estimate(copying: 2 * keptRef.uncompressedSize) + estimate(copying: live)) / 2
        let device = try await Self.syncUnderBudget(rig, name: "in-place", budget: budget, data: data, serving: 2)
        defer { device.stop() }
        #expect(try device.query("release notes edition", mode: "lexical").version == version)
        let log = device.log
        if keptDeltaTorn {
            #expect(log.contains("removed previous version 1 to make room for version \(version)"), "\(log)")
            #expect(log.contains("cairn.sync.path=delta-on-copy") && !log.contains("falling back to the full snapshot"), "\(log)")
            #expect(device.syncStatus["previous_dropped"] as? Int == 1)
        } else {
            #expect(log.contains("cairn.sync.path=delta-in-place"), "\(log)")
            #expect(!log.contains("removed previous version"), "\(log)")
            #expect(device.syncStatus["previous_dropped"] is NSNull || device.syncStatus["previous_dropped"] == nil)
        }
        #expect(Self.content(data) <= budget)
    }

    @Test("Given a download cut off for a version since superseded, when the next version fits the budget only without it, then the abandoned download is removed and the version installs")
    func abandonedDownloadMakesRoom() async throws {
        let data = try TemporaryDirectory.make() + "/device"
        let rig = try await Rig(dataDirectory: data)
        defer { rig.stop() }
        // Version 2's delta (with 400,000 bytes of random words) is cut at three quarters: a
        // resumable download is left in staging.
        try rig.publishNext(bulk: 400_000)
        let delta = try #require(try rig.currentManifest().deltas.first { $0.fromVersion == 1 })
        try rig.server.set(["cut_after": delta.size * 3 / 4])
        let cut = try await rig.syncAttempt()
        #expect(cut?.code == "network", "\(String(describing: cut))")
        rig.device.stop()
        try rig.server.clear()
        let staging = data + "/staging"
        let partials = ((try? FileManager.default.contentsOfDirectory(atPath: staging)) ?? []).filter { $0.hasSuffix(".partial") }
        let abandoned = try #require(partials.first, "no download left in staging")
        let abandonedBytes = try #require(try FileManager.default.attributesOfItem(atPath: staging + "/" + abandoned)[.size] as? Int64)
        try #require(abandonedBytes >= 50_000, "\(abandonedBytes) bytes staged")

        // Version 3 (no bulk) needs none of version 2's blobs. The budget holds what the device
        // has without the abandoned download, plus version 3's install, plus half that download.
        let version = try rig.publishNext()
        let manifest = try rig.currentManifest()
        let ref = try #require(manifest.deltas.first { $0.fromVersion == 1 })
        let live = data + "/versions/1/"
        let copied = FileManager.default.fileExists(atPath: live + DataDirectoryLayout.spareIndexFile) ? 0
            : try #require(try FileManager.default.attributesOfItem(atPath: live + DataDirectoryLayout.indexFile)[.size] as? Int)
        let needed = SyncPlanner.requiredBytes(path: .delta(ref), alreadyStaged: 0, currentIndexSize: Int64(copied),
                                               rowsBytes: SyncPlanner.rowsBytes(path: .delta(ref), chunks: manifest.chunkCount,
                                                                                dimension: manifest.dimension),
                                               missingModelBytes: 0, margin: 0)
        let budget = Self.content(data) - abandonedBytes + needed + abandonedBytes / 2
        let device = try await Self.syncUnderBudget(rig, name: "abandoned", budget: budget, data: data, serving: 1)
        defer { device.stop() }
        #expect(try device.query("release notes edition", mode: "lexical").version == version)
        #expect(device.log.contains("bytes of abandoned downloads to make room for version \(version)"), "\(device.log)")
        #expect(!FileManager.default.fileExists(atPath: staging + "/" + abandoned))
        #expect(Self.content(data) <= budget)
    }

    @Test("Given a rollback from version 3 to 2 (version 3's folder no longer linked), when version 4 does not fit the budget beside it, then that folder is removed first, before the refusal counts what is in use, and with room for version 4 beside version 2 alone it installs")
    func rolledBackFromMakesRoom() async throws {
        let data = try TemporaryDirectory.make() + "/device"
        let rig = try await Rig(dataDirectory: data)
        defer { rig.stop() }
        for _ in 0..<2 {
            try rig.publishNext(bulk: 100_000)
            #expect(try await ProgressTests.syncWait(rig).status == 0)
        }
        rig.device.stop()
        // A budget nothing fits (start-up removes folders no link names: the rollback is made by
        // the cairnd that then syncs).
        let tiny = try DeviceProcess(rig.workspace, sources: [rig.server.url], name: "tiny",
                                     config: ["max_disk_bytes": "1"], dataDirectory: data)
        defer { tiny.stop() }
        try await tiny.waitForVersion(3)
        let rollback = try tiny.cairn(["rollback"])
        #expect(rollback.status == 0, "\(rollback.error)")
        #expect(Self.versions(data) == ["2", "3"])
        let version = try rig.publishNext(bulk: 100_000)

        // The refusal says what version 4 needs beside what is in use, and version 3's folder
        // is gone first.
        let refused = try tiny.cairn(["sync", "--wait"])
        tiny.stop()
        #expect(refused.status == 1 && refused.error.contains("(disk_budget)"), "\(refused.error)")
        #expect(tiny.log.contains("removed version folders no link names (3) to make room for version \(version)"), "\(tiny.log)")
        #expect(Self.versions(data) == ["2"])
        let words = refused.error.split(separator: " ")
        let needed = try #require(words.firstIndex(of: "needs").flatMap { Int64(words[$0 + 1]) }, "\(refused.error)")

        let budget = Self.content(data) + 2 * needed
        let device = try await Self.syncUnderBudget(rig, name: "fits", budget: budget, data: data, serving: 2)
        defer { device.stop() }
        #expect(try device.query("release notes edition", mode: "lexical").version == version)
        #expect(Self.content(data) <= budget)
    }

    @Test("Given a full install with spare_index_min_bytes 0, when status is read over the socket, then spare is ready and cairn status says the next delta applies in place; after that delta, spare is null")
    func spareInStatus() async throws {
        let rig = try await Rig(config: ["spare_index_min_bytes": "0"])
        defer { rig.stop() }
        // The copy runs after the start-up attempt, in the background.
        try await waitUntil("the spare is kept") { rig.device.syncStatus["spare"] as? String == "ready" }
        #expect(try rig.device.cairn(["status"]).output.contains("spare       ready: the next delta applies in place"))
        let version = try rig.publishNext()
        #expect(try await ProgressTests.syncWait(rig).status == 0)
        #expect(rig.wrongAnswer(expecting: version) == nil)
        #expect(rig.device.log.contains("cairn.sync.path=delta-in-place"))
        #expect(rig.device.syncStatus["spare"] is NSNull)
        #expect(try !rig.device.cairn(["status"]).output.contains("spare "))
    }
}
