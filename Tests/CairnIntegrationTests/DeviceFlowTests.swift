import CairnCore
import CairnIndex
import CairnTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The main job with every part a real process: `cairn-server publish` and `serve` (or nginx),
/// `cairnd` syncing over HTTP and answering on its Unix socket, `cairn` asking. The tiny
/// random model keeps it fast; the flow is the same as with MiniLM (scripts/demo runs that).
/// SIGKILL during sync lives in CairnFaultTests with the other faults.
@Suite("publish, serve, sync, query: real processes", .offCooperativePool, .serialized)
struct DeviceFlowTests {
    static let version1 = Workspace.version1
    static let version2 = Workspace.version2

    @Test("Given a published channel served by cairn-server, when a device syncs, updates by delta and loses the network, then it always answers from one verified version")
    func publishServeSyncQuery() async throws {
        let workspace = try Workspace()
        try workspace.publish(Self.version1)
        let (server, url, serverLog) = try await workspace.serve()
        defer { stopProcess(server) }
        let device = try DeviceProcess(workspace, sources: [url])
        defer { device.stop() }

        // Then version 1 is installed and answers from its own chunks.
        try await device.waitForVersion(1)
        let first = try device.query("boil water")
        #expect(first.version == 1 && first.ids.first == "boil")
        #expect(Set(first.ids).isSubset(of: Set(Self.version1.map(\.id))))

        // When version 2 is published and the device is told to sync, it takes the delta.
        try workspace.publish(Self.version2)
        let blobs = try workspace.blobs()
        #expect(blobs.deltas.count == 1)
        #expect(try device.cairn(["sync"]).status == 0)
        try await device.waitForVersion(2)
        let second = try device.query("sandbags pyramid")
        #expect(second.version == 2 && second.ids.first == "sandbag")
        #expect(!second.ids.contains("storm"))
        let requests = (try? String(contentsOfFile: serverLog, encoding: .utf8)) ?? ""
        #expect(requests.contains(blobs.deltas[0]), "the device should have fetched the delta")
        #expect(!requests.contains(blobs.snapshot), "the device should not have fetched version 2's full snapshot")

        // When the network goes away, the device keeps answering, from version 2, offline.
        stopProcess(server)
        #expect(try device.cairn(["sync"]).status == 0)
        try await waitUntil("status says offline", seconds: 30) {
            (device.status()["sync"] as? [String: Any])?["online"] as? Bool == false
        }
        let offline = try device.query("crank radio")
        #expect(offline.version == 2 && offline.ids.first == "radio" && !offline.online)
    }

    @Test("Given a stick with version 1 listed before an origin with version 2, when a new device syncs once, then it installs the stick's version, asks the origin at once rather than after the poll interval, and serves version 2")
    func newerSourceAskedAfterAnInstall() async throws {
        let workspace = try Workspace()
        try workspace.publish(Self.version1)
        let stick = workspace.folder + "/stick"
        try FileManager.default.copyItem(atPath: workspace.repo, toPath: stick)
        try workspace.publish(Self.version2)
        let (server, url, _) = try await workspace.serve()
        defer { stopProcess(server) }
        // An hour between polls: only the attempt right after the stick's install reaches 2.
        let device = try DeviceProcess(workspace, sources: ["file://" + stick, url])
        defer { device.stop() }
        try await device.waitForVersion(2)
        let log = device.log
        #expect(log.contains("cairn.sync.version=1 [CairnSync] installed version") && log.contains("asking the others now"), "\(log)")
        #expect(device.syncStatus["last_outcome"] as? String == "installed")
    }

    @Test("Given cairnd with sync_request_interval = 3600, when a caller asks for a sync six times in a row, then five `cairn sync --wait` get their attempt, and the sixth's waits: status says when it starts, `cairn sync --wait --timeout` says why it still waits, and the log says once that requests come faster than cairnd takes them")
    func requestedSyncsAreLimited() async throws {
        let workspace = try Workspace()
        try workspace.publish(Self.version1)
        let (server, url, _) = try await workspace.serve()
        defer { stopProcess(server) }
        // Polls a day apart: the time status gives is the allowance's, not the next poll's.
        let device = try DeviceProcess(workspace, sources: [url], config: ["sync_request_interval": "3600"], pollInterval: 86_400)
        defer { device.stop() }
        try await device.waitForVersion(1)
        for request in 1...5 {
            let waited = try device.cairn(["sync", "--wait"])
            #expect(waited.status == 0 && waited.output == "version 1 is the newest\n", "request \(request): \(waited.output) \(waited.error)")
        }
        let finished = device.attemptsFinished
        // The sixth request, then a wait that joins it once status says it is held: the wait's
        // timeout then finds it held, however long cairnd took to get there.
        #expect(try device.cairn(["sync"]).status == 0)
        #expect(await eventuallyAsync { device.syncStatus["request_held_until"] is String }, "\(device.syncStatus)")
        let held = try device.cairn(["sync", "--wait", "--timeout", "1"])
        #expect(held.status == 1 && held.error.contains("requested syncs come faster than cairnd starts them (sync_request_interval), and the attempt starts at "),
                "\(held.error)")
        let until = try #require((device.syncStatus["request_held_until"] as? String).flatMap { ISO8601DateFormatter().date(from: $0) })
        #expect(until.timeIntervalSinceNow > 3000, "\(until)")
        #expect(device.attemptsFinished == finished)
        let said = device.log.split(separator: "\n").filter { $0.contains("requested syncs come faster than 5 at once, then one per 3600 s") }
        #expect(said.count == 1 && said[0].contains("notice"), "\(device.log)")
    }

    @Test("Given a stick source that is not plugged in, listed before an origin that is up to date, when the device polls five times, then the stick's failure is logged at the 1st, 2nd and 4th attempt only (then at each power of two), not at every poll; status counts its failures in a row, and state.json, not written again for these routine attempts, holds them once cairnd stops")
    func repeatedSourceFailureLoggedSparingly() async throws {
        let workspace = try Workspace()
        try workspace.publish(Self.version1)
        let (server, url, _) = try await workspace.serve()
        defer { stopProcess(server) }
        let device = try DeviceProcess(workspace, sources: ["file://" + workspace.folder + "/no-stick", url])
        defer { device.stop() }
        try await device.waitForVersion(1)
        for _ in 0..<4 {
            let waited = try device.cairn(["sync", "--wait"])
            #expect(waited.status == 0 && waited.output.hasSuffix("version 1 is the newest\n"), "\(waited.output) \(waited.error)")
        }
        let said = device.log.split(separator: "\n").filter { $0.contains("no-stick") && $0.contains("sync source refused or failed") }
        #expect(said.compactMap { $0.split(separator: " ").first { $0.hasPrefix("cairn.sync.failures_in_a_row=") } }
                == ["cairn.sync.failures_in_a_row=1", "cairn.sync.failures_in_a_row=2", "cairn.sync.failures_in_a_row=4"], "\(said)")
        let stick = (device.syncStatus["sources"] as? [[String: Any]])?.first
        #expect(stick?["failures_in_a_row"] as? Int == 5 && stick?["healthy"] as? Bool == false, "\(String(describing: stick))")
        #expect(try device.cairn(["status"]).output.contains("no-stick failing (5 attempts in a row)"))
        // The attempts after the first changed only routine fields: kept in memory, written as
        // cairnd stops (SIGTERM).
        func stickOnDisk() -> Int? {
            (device.state["sources"] as? [[String: Any]])?.first { ($0["url"] as? String)?.hasSuffix("no-stick") == true }?["consecutive_failures"] as? Int
        }
        #expect(stickOnDisk() == 1 && device.state["attempts"] as? Int == 1, "\(device.state)")
        device.stop()
        #expect(stickOnDisk() == 5 && device.state["attempts"] as? Int == 5, "\(device.state)")
    }

    @Test("Given sources written with a user and password (one refusing connections, one serving), then the device syncs with them, neither its status nor its log shows the password (each shows user:***@), and state.json, which keeps them, is its owner's alone")
    func sourcePasswordsNotShown() async throws {
        let workspace = try Workspace()
        try workspace.publish(Self.version1)
        let (server, url, _) = try await workspace.serve()
        defer { stopProcess(server) }
        let dead = freePort()
        let sources = ["http://ops:s3cret@127.0.0.1:\(dead)/repo", url.replacingOccurrences(of: "http://", with: "http://ops:s3cret@")]
        let device = try DeviceProcess(workspace, sources: sources)
        defer { device.stop() }
        try await device.waitForVersion(1)
        let waited = try device.cairn(["sync", "--wait"])
        #expect(waited.status == 0, "\(waited.output) \(waited.error)")
        let status = try device.cairn(["status", "--json"])
        #expect(status.status == 0 && !status.output.contains("s3cret") && status.output.contains("http://ops:***@127.0.0.1:\(dead)/repo"), "\(status.output)")
        let refused = device.log.split(separator: "\n").filter { $0.contains("sync source refused or failed") }
        #expect(!refused.isEmpty && refused.allSatisfy { $0.contains("ops:***@127.0.0.1") }, "\(device.log)")
        #expect(!device.log.contains("s3cret"), "\(device.log)")
        // state.json keeps the URLs as configured: its owner's alone.
        let mode = try FileManager.default.attributesOfItem(atPath: device.dataDirectory + "/state.json")[.posixPermissions] as? Int
        #expect(mode == 0o600, "\(String(describing: mode))")
    }

    @Test("Given a device polling once an hour on version 1, when version 2 is published and cairnd gets SIGHUP, then it syncs at once and serves version 2, still running")
    func hangupSyncsNow() async throws {
        let workspace = try Workspace()
        try workspace.publish(Self.version1)
        let (server, url, _) = try await workspace.serve()
        defer { stopProcess(server) }
        let device = try DeviceProcess(workspace, sources: [url], pollInterval: 3600)
        defer { device.stop() }
        try await device.waitForVersion(1)
        try workspace.publish(Self.version2)
        #expect(kill(device.process.processIdentifier, SIGHUP) == 0)
        try await device.waitForVersion(2)
        #expect(device.process.isRunning)
    }

    @Test("Given a config file naming a key this build does not know (pushed to a fleet for a newer cairnd), when cairnd starts, then it serves, and logs one warning naming the line and the key")
    func unknownConfigKeySkipped() async throws {
        let workspace = try Workspace()
        try workspace.publish(Self.version1)
        let (server, url, _) = try await workspace.serve()
        defer { stopProcess(server) }
        let device = try DeviceProcess(workspace, sources: [url], config: ["mirror_weight": "3"])
        defer { device.stop() }
        try await device.waitForVersion(1)
        let warned = device.log.split(separator: "\n").filter { $0.contains("mirror_weight is not a setting this cairnd knows") }
        #expect(warned.count == 1 && warned[0].contains("warning") && warned[0].contains("config line 1"), "\(device.log)")
    }

    /// A served workspace and the data directory of a device that installed version 1, then
    /// version 2 by a sync (so version 1 is kept as previous), and stopped; the server runs on.
    static func stoppedOnVersion2(_ workspace: Workspace) async throws -> (server: Process, url: String, data: String) {
        try workspace.publish(Self.version1)
        let (server, url, _) = try await workspace.serve()
        do {
            let device = try DeviceProcess(workspace, sources: [url])
            defer { device.stop() }
            try await device.waitForVersion(1)
            try workspace.publish(Self.version2)
            let synced = try device.cairn(["sync", "--wait"])
            #expect(synced.status == 0, "\(synced.error)")
            try await device.waitForVersion(2)
            return (server, url, device.dataDirectory)
        } catch {
            stopProcess(server)
            throw error
        }
    }

    @Test("Given a device on version 2 with version 1 kept, when version 2 is one a newer cairnd installed (its manifest's format_version 2) and cairnd starts on it, then version 1 is current and answers, version 2 is kept under the newer link, the log and status say to upgrade, and export works; the upgrade back serves version 2 with version 1 as previous; a downgrade again whose sync installs version 2 in a format it reads drops the newer link")
    func versionOfANewerCairndKept() async throws {
        let workspace = try Workspace()
        let (server, url, data) = try await Self.stoppedOnVersion2(workspace)
        defer { stopProcess(server) }
        func link(_ name: String) -> String? { try? FileManager.default.destinationOfSymbolicLink(atPath: data + "/" + name) }

        // An installed manifest is not verified again, so a changed number stands for a newer
        // cairnd's format; this build plays the older cairnd that a downgrade puts back.
        let manifest = data + "/versions/2/manifest.json"
        let good = try String(contentsOfFile: manifest, encoding: .utf8)
        let newer = good.replacingOccurrences(of: "\"format_version\":1", with: "\"format_version\":2")
        try #require(newer != good)
        try newer.write(toFile: manifest, atomically: true, encoding: .utf8)
        // Without a source: a sync would install version 2 again from this publisher, which
        // writes the format this build reads.
        let older = try DeviceProcess(workspace, sources: [], name: "older", dataDirectory: data)
        try await older.waitForVersion(1)
        #expect(try older.query("boil water").version == 1)
        let export = try older.cairn(["export", "--to", workspace.folder + "/stick"])
        #expect(export.status == 0, "\(export.error)")
        #expect(older.syncStatus["newer_version"] as? Int == 2)
        #expect(try older.cairn(["status"]).output.contains("newer       version 2, installed by a newer cairnd, is kept"))
        older.stop()
        #expect(older.log.contains("installed by a newer cairnd"), "\(older.log)")
        #expect(link("current") == "versions/1" && link("newer") == "versions/2" && link("previous") == nil)
        #expect(FileManager.default.fileExists(atPath: data + "/versions/2/index.sqlite"))

        // The upgrade back.
        try good.write(toFile: manifest, atomically: true, encoding: .utf8)
        let upgraded = try DeviceProcess(workspace, sources: [], name: "upgraded", dataDirectory: data)
        try await upgraded.waitForVersion(2)
        upgraded.stop()
        #expect(link("current") == "versions/2" && link("previous") == "versions/1" && link("newer") == nil)

        // Down again, with a source that has version 2 in a format this build reads: installed
        // over the folder, the newer link gone.
        try newer.write(toFile: manifest, atomically: true, encoding: .utf8)
        let again = try DeviceProcess(workspace, sources: [url], name: "again", dataDirectory: data)
        defer { again.stop() }
        try await again.waitForVersion(2)
        #expect(link("current") == "versions/2" && link("newer") == nil, "\(again.log)")
    }

    @Test("Given a device on version 2 with version 1 kept, when version 2's installed manifest holds a value this build does not know, then cairnd keeps it as a newer cairnd's only while the publisher's signature over it verifies: a new field the publisher's key signed goes under the newer link; one bit flipped on the disk (float32 read as float33) is damage, so version 1 serves, no newer link is kept, and the log says the manifest changed on the disk; a kept newer version damaged later is dropped at the next start")
    func damagedManifestIsNotANewerCairnds() async throws {
        let workspace = try Workspace()
        let (server, url, data) = try await Self.stoppedOnVersion2(workspace)
        defer { stopProcess(server) }
        func link(_ name: String) -> String? { try? FileManager.default.destinationOfSymbolicLink(atPath: data + "/" + name) }
        #expect(link("current") == "versions/2" && link("previous") == "versions/1")
        let manifest = data + "/versions/2/manifest.json"
        let good = try #require(FileManager.default.contents(atPath: manifest))

        // A newer cairnd's: the same format with a field this build does not know, signed by
        // the publisher's key, as a newer publisher would.
        var envelope = try SignedManifest.decodeEnvelope(Array(good))
        guard case .object(var fields) = envelope.content else { Issue.record("not an object"); return }
        fields["regions"] = .array([.string("north")])
        let key = try PublisherKey(fileText: String(contentsOfFile: workspace.key, encoding: .utf8))
        envelope = SignedEnvelope(content: .object(fields), signatures: SignedEnvelope.sign(.object(fields), domain: SignedManifest.domain, keys: [key]))
        try Data(envelope.encode(field: "manifest")).write(to: URL(fileURLWithPath: manifest), options: .atomic)
        let older = try DeviceProcess(workspace, sources: [], name: "older", dataDirectory: data)
        try await older.waitForVersion(1)
        older.stop()
        #expect(older.log.contains("installed by a newer cairnd"), "\(older.log)")
        #expect(link("current") == "versions/1" && link("newer") == "versions/2")

        // The upgrade back, then one bit of the intact file flipped.
        try good.write(to: URL(fileURLWithPath: manifest), options: .atomic)
        let upgraded = try DeviceProcess(workspace, sources: [], name: "upgraded", dataDirectory: data)
        try await upgraded.waitForVersion(2)
        upgraded.stop()
        #expect(link("current") == "versions/2" && link("previous") == "versions/1" && link("newer") == nil)
        let text = String(decoding: good, as: UTF8.self)
        let flipped = text.replacingOccurrences(of: #""dtype":"float32""#, with: #""dtype":"float33""#)
        try #require(flipped != text)
        try Data(flipped.utf8).write(to: URL(fileURLWithPath: manifest), options: .atomic)
        let damaged = try DeviceProcess(workspace, sources: [], name: "damaged", dataDirectory: data)
        try await damaged.waitForVersion(1)
        #expect(try damaged.query("boil water").version == 1)
        #expect(damaged.syncStatus["newer_version"] is NSNull || damaged.syncStatus["newer_version"] == nil)
        damaged.stop()
        #expect(damaged.log.contains("changed on the disk since its install"), "\(damaged.log)")
        #expect(!damaged.log.contains("installed by a newer cairnd"), "\(damaged.log)")
        #expect(link("current") == "versions/1" && link("newer") == nil)

        // A newer cairnd's version kept under the newer link (as a build before this rule kept a
        // damaged one too), damaged while kept: dropped at the next start, not kept for ever.
        let synced = try DeviceProcess(workspace, sources: [url], name: "synced", dataDirectory: data)
        try await synced.waitForVersion(2)
        synced.stop()
        try Data(envelope.encode(field: "manifest")).write(to: URL(fileURLWithPath: manifest), options: .atomic)
        let downgraded = try DeviceProcess(workspace, sources: [], name: "downgraded", dataDirectory: data)
        try await downgraded.waitForVersion(1)
        downgraded.stop()
        #expect(link("current") == "versions/1" && link("newer") == "versions/2")
        let kept = String(decoding: envelope.encode(field: "manifest"), as: UTF8.self)
        try Data(kept.replacingOccurrences(of: "north", with: "nortj").utf8).write(to: URL(fileURLWithPath: manifest), options: .atomic)
        let again = try DeviceProcess(workspace, sources: [], name: "again", dataDirectory: data)
        defer { again.stop() }
        try await again.waitForVersion(1)
        #expect(await eventuallyAsync { again.log.contains("the version the newer link names does not read; it is dropped") }, "\(again.log)")
        #expect(again.syncStatus["newer_version"] is NSNull || again.syncStatus["newer_version"] == nil)
        #expect(link("current") == "versions/1" && link("newer") == nil && !FileManager.default.fileExists(atPath: data + "/versions/2"))
    }

    @Test("Given a device serving version 1, when one hex digit of its installed manifest's snapshot hash changes on the disk (the manifest still reads), then cairnd serves version 1 on and says in one error line that the manifest changed since its install")
    func readableDamagedManifestSaid() async throws {
        let workspace = try Workspace()
        try workspace.publish(Self.version1)
        let device = try DeviceProcess(workspace, sources: ["file://" + workspace.repo])
        try await device.waitForVersion(1)
        device.stop()
        let manifest = device.dataDirectory + "/versions/1/manifest.json"
        var text = try String(contentsOfFile: manifest, encoding: .utf8)
        let snapshot = try #require(text.range(of: #""snapshot":{"#))
        let hash = try #require(text.range(of: #""sha256":""#, range: snapshot.upperBound..<text.endIndex))
        let digit = text[hash.upperBound]
        text.replaceSubrange(hash.upperBound...hash.upperBound, with: digit == "0" ? "1" : "0")
        try text.write(toFile: manifest, atomically: true, encoding: .utf8)
        let again = try DeviceProcess(workspace, sources: [], name: "again", dataDirectory: device.dataDirectory)
        defer { again.stop() }
        try await again.waitForVersion(1)
        #expect(try again.query("boil water").version == 1)
        let said = again.log.split(separator: "\n").filter { $0.contains("changed on the disk since its install") }
        #expect(said.count == 1 && said[0].contains("error") && said[0].contains("it still reads, so version 1 serves if its index opens"), "\(again.log)")
    }

    @Test("Given a device serving version 1 from an HTTP source (its ETag kept), when a digit of version 1's state root changes in its manifest on the disk (it still reads) and cairnd restarts, then its sync writes the source's copy over it (the ETag not sent: a 304 would say up to date), in one warning line, without downloading or building the version again, and the version exports again")
    func readableDamagedManifestWrittenAgain() async throws {
        let workspace = try Workspace()
        try workspace.publish(Self.version1)
        let (server, url, _) = try await workspace.serve()
        defer { stopProcess(server) }
        let device = try DeviceProcess(workspace, sources: [url])
        try await device.waitForVersion(1)
        device.stop()
        let folder = device.dataDirectory + "/versions/1", manifest = folder + "/manifest.json"
        func inode(_ name: String) -> UInt64? { (try? FileManager.default.attributesOfItem(atPath: folder + "/" + name))?[.systemFileNumber] as? UInt64 }
        let before = (inode("index.sqlite"), inode("snapshot.blob"))
        var text = try String(contentsOfFile: manifest, encoding: .utf8)
        let root = try #require(text.range(of: #""state_root":""#)).upperBound
        text.replaceSubrange(root...root, with: text[root] == "0" ? "1" : "0")
        try text.write(toFile: manifest, atomically: true, encoding: .utf8)

        let again = try DeviceProcess(workspace, sources: [url], name: "again", dataDirectory: device.dataDirectory)
        defer { again.stop() }
        let sync = try again.cairn(["sync", "--wait", "--timeout", "60"])
        #expect(sync.status == 0, "\(sync)")
        #expect(FileManager.default.contents(atPath: manifest) == FileManager.default.contents(atPath: workspace.manifestPath))
        let said = again.log.split(separator: "\n").filter { $0.contains("written again from the source's copy of version 1") }
        #expect(said.count == 1 && said[0].contains("warning") && said[0].contains("changed on the disk since its install"), "\(again.log)")
        #expect(before.0 != nil && before.1 != nil && (inode("index.sqlite"), inode("snapshot.blob")) == before)
        #expect(try again.query("boil water").version == 1)
        #expect(try again.cairn(["export", "--to", workspace.folder + "/stick"]).status == 0)
    }

    @Test("Given a device serving version 1, when its mapped rows file is cut short under it, then the next query stops cairnd by SIGBUS with one line naming the file and records it, and a restart removes that file (a bad sector would stop it again), writes it anew and serves version 1 again")
    func failedReadOfMappedFileNamesIt() async throws {
        let workspace = try Workspace()
        try workspace.publish(Self.version1)
        let (server, url, _) = try await workspace.serve()
        defer { stopProcess(server) }
        let device = try DeviceProcess(workspace, sources: [url])
        defer { device.stop() }
        try await device.waitForVersion(1)
        #expect(try device.query("boil water").ids.first == "boil")

        // Another process cuts the mapped file short. A disk's read error, which cannot be made
        // on demand, raises the same signal on the same read.
        let rows = device.dataDirectory + "/versions/1/index.rows"
        let whole = try Data(contentsOf: URL(fileURLWithPath: rows))
        #expect(truncate(rows, 0) == 0)
        #expect(throws: (any Error).self) { try device.query("boil water") }
        device.process.waitUntilExit()
        #expect(device.process.terminationReason == .uncaughtSignal && device.process.terminationStatus == SIGBUS)
        let lines = device.log.split(separator: "\n").filter { $0.contains("a read of this mapped file failed") }
        #expect(lines.count == 1, "\(device.log)")
        #expect(lines.first?.hasPrefix("cairnd: ") == true && lines.first?.contains("versions/1/index.rows") == true, "\(lines)")

        // The handler also recorded the file for the next start: a bad sector would stop that
        // one on the same read. The bytes put back (a read that would fail again cannot be made
        // on demand), the next start still removes that file, and writes it anew from the index.
        let marker = device.dataDirectory + "/failed-read"
        #expect((try? String(contentsOfFile: marker, encoding: .utf8))?.hasSuffix("versions/1/index.rows") == true)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: rows))
        try handle.write(contentsOf: whole)
        try handle.close()
        var before = stat()
        #expect(stat(rows, &before) == 0)
        let again = try DeviceProcess(workspace, sources: [url], name: "restarted", dataDirectory: device.dataDirectory)
        defer { again.stop() }
        try await again.waitForVersion(1)
        #expect(try again.query("boil water").ids.first == "boil")
        #expect(again.log.contains("the last run stopped on a failed read of ") && again.log.contains("index.rows"), "\(again.log)")
        #expect(!FileManager.default.fileExists(atPath: marker))
        var after = stat()
        // (Its inode number may be reused; its modification time is the rewrite's.)
        #expect(stat(rows, &after) == 0 && (after.st_mtim.tv_sec, after.st_mtim.tv_nsec) != (before.st_mtim.tv_sec, before.st_mtim.tv_nsec),
                "the rows file is written anew")
    }

    @Test("Given the same repository on nginx, when a device syncs from it, then it installs and answers")
    func syncFromNginx() async throws {
        let workspace = try Workspace()
        try workspace.publish(Self.version1)
        try workspace.publish(Self.version2)
        let nginx = try Nginx(root: workspace.repo)
        defer { nginx.stop() }
        let device = try DeviceProcess(workspace, sources: [nginx.url])
        defer { device.stop() }
        try await device.waitForVersion(2)
        #expect(try device.query("sandbags pyramid").ids.first == "sandbag")
        #expect(await nginx.logged { $0.contains("/channels/field/manifest.json") })
    }

    /// Every row's stored hash in a version's file broken: a pass over its rows refuses it.
    static func breakStoredHashes(version: Int, in dataDirectory: String) throws {
        try Database(path: dataDirectory + "/versions/\(version)/index.sqlite", mode: .readWrite)
            .exec("UPDATE chunks SET content_hash = 'not a hash'")
    }

    /// A version cairnd cannot open: without its rows files its file is read whole (as a data
    /// directory of an older cairnd would be), and its broken stored hashes refuse it.
    static func makeUnopenable(version: Int, in dataDirectory: String) throws {
        for file in ["index.rows", "index.overlay"] { unlink(dataDirectory + "/versions/\(version)/" + file) }
        try breakStoredHashes(version: version, in: dataDirectory)
    }

    @Test("Given a device whose only version no longer opens, when cairnd restarts, then it drops current (nothing to fall back to) and its first sync installs that version again and serves it")
    func onlyVersionUnusableAtRestart() async throws {
        let workspace = try Workspace()
        try workspace.publish(Self.version1)
        let (server, url, _) = try await workspace.serve()
        defer { stopProcess(server) }
        var device = try DeviceProcess(workspace, sources: [url])
        defer { device.stop() }
        try await device.waitForVersion(1)
        #expect(!FileManager.default.fileExists(atPath: device.dataDirectory + "/previous"))

        device.stop()
        try Self.makeUnopenable(version: 1, in: device.dataDirectory)
        device = try DeviceProcess(workspace, sources: [url])
        // Without the drop, every sync found version 1 up to date and nothing ever answered.
        try await device.waitForVersion(1)
        #expect(device.log.contains("the installed version cannot be served; a sync installs it again"), "\(device.log)")
        #expect(try device.query("boil water").ids.isEmpty == false)
    }

    @Test("Given a device serving a version reached by a delta, when cairnd restarts, then it opens it from its rows files without reading a row and takes the next delta as an overlay; when the installed file was altered, the next delta is refused and the full snapshot installs; without the rows files, a restart reads every row, and a version that does not open gives way to the previous one, links included, until a sync installs it again")
    func restartOpensRowsFiles() async throws {
        let workspace = try Workspace()
        try workspace.publish(Self.version1)
        let (server, url, _) = try await workspace.serve()
        defer { stopProcess(server) }
        var device = try DeviceProcess(workspace, sources: [url])
        defer { device.stop() }
        func rows() -> [String: Int] {
            let rows = device.status()["rows"] as? [String: Any] ?? [:]
            return ["rows_files": rows["source"] as? String == "rows_files" ? 1 : 0,
                    "overlay": rows["overlay_rows"] as? Int ?? -1, "removed": rows["removed_rows"] as? Int ?? -1]
        }
        func restart() throws {
            device.stop()
            device = try DeviceProcess(workspace, sources: [url])
        }
        func breakStoredHashes(_ version: Int) throws { try Self.breakStoredHashes(version: version, in: device.dataDirectory) }
        try await device.waitForVersion(1)
        #expect(rows() == ["rows_files": 1, "overlay": 0, "removed": 0])
        // Version 2 by its delta: "boil" rewritten and "sandbag" added (the overlay), "boil" and
        // "storm" gone from the base.
        try workspace.publish(Self.version2)
        #expect(try device.cairn(["sync"]).status == 0)
        try await device.waitForVersion(2)
        #expect(rows() == ["rows_files": 1, "overlay": 2, "removed": 2])

        // After a restart, the next delta is checked against the rows files and joins the overlay.
        try restart()
        try await device.waitForVersion(2)
        #expect(rows() == ["rows_files": 1, "overlay": 2, "removed": 2])
        try workspace.publish(Self.version2 + [("kettle", "A kettle on a camp stove boils water without power.")])
        #expect(try device.cairn(["sync"]).status == 0)
        try await device.waitForVersion(3)
        #expect(rows() == ["rows_files": 1, "overlay": 3, "removed": 2])
        #expect(try device.query("kettle camp stove").ids.first == "kettle")

        // Every row's stored hash broken in the installed file: a pass over its rows would refuse
        // it. A restart opens it from the rows files, so it still serves; the background check
        // finds the file altered, so the next delta, checked over the file's own hashes, is
        // refused and the full snapshot installs.
        device.stop()
        try breakStoredHashes(3)
        try restart()
        try await device.waitForVersion(3)
        #expect(rows() == ["rows_files": 1, "overlay": 3, "removed": 2])
        #expect(try device.query("kettle camp stove").ids.first == "kettle")
        try workspace.publish(Self.version2 + [("kettle", "A kettle on a camp stove boils water; keep the lid on.")])
        #expect(try device.cairn(["sync"]).status == 0)
        try await device.waitForVersion(4)
        #expect(rows() == ["rows_files": 1, "overlay": 0, "removed": 0])
        #expect(device.log.contains("no longer holds the rows it was installed with"))
        #expect(device.log.contains("falling back to the full snapshot"))

        // Version 4 made unopenable: cairnd serves the previous one.
        device.stop()
        try Self.makeUnopenable(version: 4, in: device.dataDirectory)
        try restart()
        // cairnd serves the previous version, and makes the links say so: no later install can
        // leave version 3 unreferenced (and remove it) while it serves. Version 4's folder goes,
        // and the first sync installs it again, its manifest fetched whole (the ETag cached with
        // version 4 installed would answer "not modified").
        try await device.waitForVersion(4)
        #expect(device.log.contains("the installed version is unusable; trying the previous one"))
        #expect(device.log.contains("cairn.version=3 [CairnDaemon] current now points at the previous version"), "\(device.log)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: device.dataDirectory + "/current") == "versions/4")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: device.dataDirectory + "/previous") == "versions/3")
        #expect(rows() == ["rows_files": 1, "overlay": 0, "removed": 0])
        #expect(try device.query("kettle camp stove").ids.first == "kettle")
    }
}
