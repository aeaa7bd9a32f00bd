import CairnCore
import CairnTestSupport
import Foundation
import Synchronization
import Testing

/// `cairn rollback` and `cairn export` against real processes: cairn-server serving a
/// repository, cairnd syncing it, the `cairn` CLI asking over the socket, and a second cairnd
/// syncing from an export through a `file://` source.
@Suite("rollback and export: real processes", .offCooperativePool, .serialized)
struct RollbackExportTests {
    @Test("Given `cairn export` waiting on cairnd, when it gets SIGINT (Ctrl-C), then it exits 130 in one line saying the wait ended and cairnd's export goes on, and when the stick may be removed")
    func interruptedExport() async throws {
        try requireOrSkip(FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"), "python3 is not installed (apt-get install python3)")
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let socket = folder + "/cairnd.sock", received = folder + "/received", logs = folder + "/cli"
        for log in [folder + "/peer", logs] { try FileManager.default.createDirectory(atPath: log, withIntermediateDirectories: true) }
        // A stand-in for a cairnd in the middle of a long export (minutes onto a slow stick, which
        // no test can time): it answers the health check, takes the export's request, says so in
        // a file, and never answers it.
        let script = """
            import os, socket, sys, time
            s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1] + ".new"); s.listen(8)
            os.rename(sys.argv[1] + ".new", sys.argv[1])
            held = []
            while True:
                c, _ = s.accept(); request = c.recv(65536)
                if request.startswith(b"GET /healthz"):
                    c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nContent-Length: 11\\r\\nConnection: close\\r\\n\\r\\n{\\"ok\\":true}"); c.close()
                elif request.startswith(b"POST /v1/export"):
                    held.append(c); open(sys.argv[2], "w").close()
            """
        let peer = try launch("/usr/bin/python3", ["-c", script, socket, received], logDirectory: folder + "/peer")
        defer { stopProcess(peer) }
        try await waitUntil("the stand-in listens", seconds: 20) { FileManager.default.fileExists(atPath: socket) }
        let export = try launch(Products.path("cairn"), ["--socket", socket, "export", "--to", folder + "/usb"], logDirectory: logs)
        defer { stopProcess(export) }
        // The export is asked for after the handler is in place.
        try await waitUntil("the stand-in has the export's request", seconds: 20) { FileManager.default.fileExists(atPath: received) }
        kill(export.processIdentifier, SIGINT)
        #expect(try await waitForExit(export) == 130)
        let output = (try? String(contentsOfFile: logs + "/daemon.log", encoding: .utf8)) ?? ""
        #expect(output == "cairn: interrupted; the wait ended, cairnd's export into \(folder)/usb goes on (`cairn status` shows it): remove the stick only once it ends\n",
                "\(output)")
    }

    static let version3: [(id: String, text: String)] = DeviceFlowTests.version2 + [
        ("generator", "Run a generator outside, never in a garage or a basement."),
    ]

    /// A flag one thread sets and another reads.
    final class Flag: Sendable {
        private let value = Atomic(false)
        var isSet: Bool { value.load(ordering: .acquiring) }
        func set() { value.store(true, ordering: .releasing) }
    }

    /// A count one thread raises and another reads.
    final class Counter: Sendable {
        private let value = Atomic(0)
        var count: Int { value.load(ordering: .acquiring) }
        func add() { value.add(1, ordering: .releasing) }
    }

    /// The `sync` object of the device's status.
    static func sync(_ device: DeviceProcess) -> [String: Any] { device.syncStatus }

    /// One `cairn query` of the loop: when it started and ended, and the version that answered.
    struct Query: Sendable {
        var started: ContinuousClock.Instant
        var ended: ContinuousClock.Instant
        var version: Int?
    }

    /// `cairn query` in a loop on another thread until a query that started after `done` was
    /// set has ended (and at least 5 ran); counts the answered queries in `answered` as it goes.
    /// Returns every query and the failures (an exit status other than 0, or a version outside
    /// `versions`).
    static func queryLoop(socket: String, folder: String, versions: Set<Int>, done: Flag,
                          answered: Counter) async throws -> (queries: [Query], failures: [String]) {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return try await onThread {
            var queries: [Query] = []
            var failures: [String] = []
            var startedAfterDone = false
            while !startedAfterDone || queries.count < 5 {
                startedAfterDone = done.isSet
                let started = ContinuousClock.now
                let result = try Binaries.run("cairn", ["--socket", socket, "query", "boil water", "--json"], in: folder)
                let answer = try? JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
                queries.append(Query(started: started, ended: .now, version: answer?["version"] as? Int))
                answered.add()
                if result.status != 0 || !versions.contains(answer?["version"] as? Int ?? -1) {
                    failures.append("status \(result.status): \(result.error)")
                }
            }
            return (queries, failures)
        }
    }

    @Test("Given a device with versions 1 and 2, when it rolls back under query load, then no query fails, it serves 1, holds 2 back, and installs only a newer 3")
    func rollback() async throws {
        let workspace = try Workspace()
        try workspace.publish(DeviceFlowTests.version1)
        let (server, url, _) = try await workspace.serve()
        defer { stopProcess(server) }
        let device = try DeviceProcess(workspace, sources: [url])
        defer { device.stop() }
        try await device.waitForVersion(1)

        // Given only version 1, rollback refuses with exit 5 and one line.
        let refused = try device.cairn(["rollback"])
        #expect(refused.status == 5)
        #expect(refused.error.contains("no_previous_version") && refused.error.split(separator: "\n").count == 1)

        try workspace.publish(DeviceFlowTests.version2)
        #expect(try device.cairn(["sync"]).status == 0)
        try await device.waitForVersion(2)

        // A "channel" that is not a string (an unset template variable, a number) is refused
        // with 400 bad_json, never read as the daemon's own channel: nothing rolls back.
        try Tools.requireCurl()
        let unexported = device.folder + "/not-exported"
        for (route, body) in [("rollback", #"{"channel": 2}"#), ("rollback", #"{"channel": null}"#),
                              ("export", #"{"to": "\#(unexported)", "channel": false}"#)] {
            let run = try await CairnTestSupport.run("/usr/bin/curl", ["-s", "-w", "\n%{http_code}", "--unix-socket", device.socket,
                                                                        "http://localhost/v1/\(route)", "-d", body])
            #expect(run.stdout.hasSuffix("\n400") && run.stdout.contains(#""code":"bad_json""#), "\(route) \(body): \(run.stdout)")
        }
        #expect(device.status()["version"] as? Int == 2 && Self.sync(device)["held_back_version"] is NSNull)
        #expect(!FileManager.default.fileExists(atPath: unexported))

        // When it rolls back while a client queries in a loop (started and answering first).
        let done = Flag(), answered = Counter()
        let socket = device.socket, loopFolder = device.folder + "/query-loop"
        async let load = Self.queryLoop(socket: socket, folder: loopFolder, versions: [1, 2], done: done, answered: answered)
        try await waitUntil("the query loop answers", seconds: 60) { answered.count > 0 }
        let rollbackStarted = ContinuousClock.now
        let rolled = try device.cairn(["rollback", "--json"])
        let rollbackEnded = ContinuousClock.now
        done.set()
        let (queries, failures) = try await load
        let runs = queries.count
        #expect(rolled.status == 0, "rollback: \(rolled.error)")
        #expect(failures.isEmpty, "\(failures.count) of \(runs) queries failed: \(failures.prefix(3))")
        // Under load: a query was in flight while the rollback ran, and the loop was answered
        // by version 2 before it and by version 1 after it.
        #expect(queries.contains { $0.started < rollbackEnded && $0.ended > rollbackStarted },
                "no query overlapped the rollback")
        #expect(queries.first?.version == 2 && queries.last?.version == 1,
                "the loop was answered by \(queries.map { $0.version ?? -1 }), not 2 first and 1 last")

        // Then version 1 serves, and status shows version 2 held back, not stale for it.
        let answer = try JSONSerialization.jsonObject(with: Data(rolled.output.utf8)) as! [String: Any]
        #expect(answer["version"] as? Int == 1 && answer["rolled_back_from"] as? Int == 2)
        #expect(try device.query("boil water").version == 1)
        #expect(Self.sync(device)["held_back_version"] as? Int == 2)
        #expect(try device.cairn(["status"]).output.contains("held back   version 2"))

        // When it polls again, version 2 is not re-installed.
        let before = device.attemptsFinished
        #expect(try device.cairn(["sync"]).status == 0)
        try await waitUntil("another sync attempt ends", seconds: 60) {
            device.attemptsFinished > before && Self.sync(device)["last_error"] is NSNull
        }
        #expect(device.status()["version"] as? Int == 1)

        // A second rollback has nothing to go back to.
        #expect(try device.cairn(["rollback"]).status == 5)

        // When version 3 is published, it is installed and the hold is cleared.
        try workspace.publish(Self.version3)
        #expect(try device.cairn(["sync", "--wait"]).status == 0)
        try await device.waitForVersion(3)
        #expect(Self.sync(device)["held_back_version"] is NSNull)
        #expect(try device.query("generator garage").ids.first == "generator")
    }

    @Test("Given a user in the socket's group (an agent's account), when it asks cairnd to roll back or export, then it is refused with 403 forbidden (cairn exits 77 in one line) and nothing changes, while it may still query and root may roll back")
    func onlyTheOperatorChangesTheDevice() async throws {
        try Tools.requireRoot("create a user and run cairn as it")
        try Tools.requireCurl()
        let socketGroup = try await SystemUsers.ensure(group: "cairn-test-socket")
        let (uid, gid) = try await SystemUsers.ensure(user: SystemUsers.outsider)
        let workspace = try Workspace()
        let device = try await Self.onVersion2(workspace, config: ["socket_group": "cairn-test-socket"])
        defer { device.stop() }
        let cairn = try await Self.cairnOthersMayRun(in: device.folder)
        func asMember(_ program: String, _ arguments: [String]) async throws -> Finished {
            try await Self.run(program, arguments, as: uid, gid, groups: [socketGroup])
        }

        let query = try await asMember(cairn, ["--socket", device.socket, "query", "boil water", "--json"])
        #expect(query.status == 0 && query.stdout.contains("\"version\":2"), "query: exit \(query.status): \(query.stderr)")
        let stick = device.folder + "/stick"
        for arguments in [["rollback"], ["export", "--to", stick]] {
            let refused = try await asMember(cairn, ["--socket", device.socket] + arguments)
            #expect(refused.status == 77, "\(arguments[0]): exit \(refused.status): \(refused.stderr)")
            #expect(refused.stderr.hasPrefix("cairn: \(arguments[0]) is only for root (cairnd's user), and this caller is user \(SystemUsers.outsider) (uid \(uid))")
                    && refused.stderr.hasSuffix("(forbidden)\n") && refused.stderr.split(separator: "\n").count == 1, "\(refused.stderr)")
        }
        // Refused before the body is read: a body that is not even JSON gets 403, not 400.
        let curl = try await asMember("/usr/bin/curl", ["-s", "-w", "\n%{http_code}", "--unix-socket", device.socket,
                                                        "http://localhost/v1/rollback", "-d", "not json"])
        #expect(curl.stdout.hasSuffix("\n403") && curl.stdout.contains(#""code":"forbidden""#), "\(curl.stdout)")

        // Nothing changed: version 2 serves, nothing is held back, nothing was written.
        #expect(device.status()["version"] as? Int == 2 && Self.sync(device)["held_back_version"] is NSNull)
        #expect(!FileManager.default.fileExists(atPath: stick))
        #expect(device.log.contains("rollback refused to user \(SystemUsers.outsider) (uid \(uid))"), "\(device.log)")

        // Root may: the same rollback goes through.
        #expect(try device.cairn(["rollback"]).status == 0)
        #expect(device.status()["version"] as? Int == 1)
    }

    /// A device with `config` that installed version 1 from a folder, then version 2 by a sync.
    static func onVersion2(_ workspace: Workspace, config: [String: String]) async throws -> DeviceProcess {
        try workspace.publish(DeviceFlowTests.version1)
        let device = try DeviceProcess(workspace, sources: ["file://" + workspace.repo], config: config)
        try await device.waitForVersion(1)
        try workspace.publish(DeviceFlowTests.version2)
        #expect(try device.cairn(["sync", "--wait"]).status == 0)
        try await device.waitForVersion(2)
        return device
    }

    /// A copy of cairn another user can run (the build's may lie under a folder only root
    /// enters), by cp(1): a file this process held open for writing could be inherited by a child
    /// another test forks meanwhile, and its exec would fail with ETXTBSY.
    static func cairnOthersMayRun(in folder: String) async throws -> String {
        let cairn = folder + "/cairn-for-others"
        let copied = try await CairnTestSupport.run("/bin/cp", [Products.path("cairn"), cairn])
        try #require(copied.status == 0, "\(copied.stderr)")
        chmod(cairn, 0o755)
        return cairn
    }

    /// `program` run as user `uid` with primary group `gid` and exactly `groups` besides.
    static func run(_ program: String, _ arguments: [String], as uid: uid_t, _ gid: gid_t, groups: [gid_t]) async throws -> Finished {
        try await CairnTestSupport.run("/usr/bin/setpriv", ["--reuid=\(uid)", "--regid=\(gid)",
                                                           "--groups=\(groups.map(String.init).joined(separator: ","))", "--", program] + arguments)
    }

    @Test("Given operator_group naming a group one user belongs to (in the group database) and another user outside it, both in the socket's group, when each asks cairnd to roll back, then the member's rollback goes through, though its process does not hold that group, and the outsider's is refused with exit 77, the line naming the group; the member's export is refused (it writes as cairnd's user)")
    func operatorGroupMayRollBack() async throws {
        try Tools.requireRoot("create users and run cairn as them")
        let socketGroup = try await SystemUsers.ensure(group: "cairn-test-socket")
        let (outsider, outsiderGroup) = try await SystemUsers.ensure(user: SystemUsers.outsider)
        let (member, memberGroup) = try await SystemUsers.ensure(user: "cairn-test-operator", memberOf: "cairn-test-operators")
        let workspace = try Workspace()
        let device = try await Self.onVersion2(workspace, config: ["socket_group": "cairn-test-socket", "operator_group": "cairn-test-operators"])
        defer { device.stop() }
        let cairn = try await Self.cairnOthersMayRun(in: device.folder)

        let refused = try await Self.run(cairn, ["--socket", device.socket, "rollback"], as: outsider, outsiderGroup, groups: [socketGroup])
        #expect(refused.status == 77 && refused.stderr.contains("or a member of group cairn-test-operators (operator_group, as `id USER` lists it), and this caller is user \(SystemUsers.outsider)"),
                "exit \(refused.status): \(refused.stderr)")
        #expect(device.status()["version"] as? Int == 2)
        // An export writes wherever cairnd's user may: not for the group.
        let stick = device.folder + "/stick"
        let export = try await Self.run(cairn, ["--socket", device.socket, "export", "--to", stick], as: member, memberGroup, groups: [socketGroup])
        #expect(export.status == 77 && !export.stderr.contains("operator_group") && !FileManager.default.fileExists(atPath: stick),
                "exit \(export.status): \(export.stderr)")
        let allowed = try await Self.run(cairn, ["--socket", device.socket, "rollback"], as: member, memberGroup, groups: [socketGroup])
        #expect(allowed.status == 0, "exit \(allowed.status): \(allowed.stderr)")
        #expect(device.status()["version"] as? Int == 1 && Self.sync(device)["held_back_version"] as? Int == 2)
    }

    @Test("Given operator_group naming no group, or the socket's own group (cairnd's, with no socket_group), when cairnd starts, then it serves and says so in one warning")
    func operatorGroupSurprisesSaid() async throws {
        let workspace = try Workspace()
        try workspace.publish(DeviceFlowTests.version1)
        let own = try requireOrSkip(getgrgid(getegid()).map { String(cString: $0.pointee.gr_name) },
                                    "this process's group (gid \(getegid())) has no name here")
        for (group, said) in [("cairn-test-no-such-group", "operator_group cairn-test-no-such-group resolves to no group"),
                              (own, "operator_group \(own) is the socket's group: every caller that may query may also roll back")] {
            let device = try DeviceProcess(workspace, sources: ["file://" + workspace.repo], name: "device-\(group)", config: ["operator_group": group])
            defer { device.stop() }
            try await device.waitForVersion(1)
            #expect(await eventuallyAsync { device.log.contains(said) }, "\(device.log)")
            #expect(device.log.components(separatedBy: said).count == 2, "said once: \(device.log)")
        }
    }

    @Test("Given a device rolled back from version 2 that syncs from a folder (file://: no ETag, so every poll reads the manifest), when it polls three times, then the hold is logged once, not at every poll while it lasts")
    func holdSaidOnce() async throws {
        let workspace = try Workspace()
        try workspace.publish(DeviceFlowTests.version1)
        let device = try DeviceProcess(workspace, sources: ["file://" + workspace.repo])
        defer { device.stop() }
        try await device.waitForVersion(1)
        try workspace.publish(DeviceFlowTests.version2)
        #expect(try device.cairn(["sync", "--wait"]).status == 0)
        try await device.waitForVersion(2)
        #expect(try device.cairn(["rollback"]).status == 0)
        for _ in 0..<3 { #expect(try device.cairn(["sync", "--wait"]).status == 0) }
        #expect(device.status()["version"] as? Int == 1)
        #expect(device.log.components(separatedBy: "newest version is held back by a rollback").count - 1 == 1, "\(device.log)")
    }

    @Test("Given cairnd in a mount namespace of its own with a private file system over a folder (as its unit's PrivateTmp gives /tmp), when cairn exports there, then it exits 1 saying this shell does not see the export, not 'exported'")
    func exportOutOfReach() async throws {
        try Tools.requireMount("start cairnd in a mount namespace of its own")
        let workspace = try Workspace()
        try workspace.publish(DeviceFlowTests.version1)
        let (server, url, _) = try await workspace.serve()
        defer { stopProcess(server) }
        let hidden = workspace.folder + "/private-tmp"
        try FileManager.default.createDirectory(atPath: hidden, withIntermediateDirectories: true)
        // unshare(1) gives cairnd its own mounts; a tmpfs over `hidden` there is its alone.
        let device = try DeviceProcess(workspace, sources: [url], name: "namespaced", wrapper: [
            "/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
            "mount -t tmpfs tmpfs \"$0\" && exec \"$@\"", hidden])
        defer { device.stop() }
        try await device.waitForVersion(1)
        let export = try device.cairn(["export", "--to", hidden + "/usb"])
        #expect(export.status == 1 && export.error.contains("is not there for this shell"), "\(export)")
        #expect(!FileManager.default.fileExists(atPath: hidden + "/usb"))
        // A folder both see: exported as before.
        let shared = try device.cairn(["export", "--to", workspace.folder + "/usb"])
        #expect(shared.status == 0 && shared.output.hasPrefix("exported version 1"), "\(shared)")
    }

    @Test("Given a device that installed version 2 by a delta, when it exports, then a fresh device syncs the export over file:// and answers the same; a tampered export is refused, and an empty --to is a usage error")
    func exportAfterDelta() async throws {
        let workspace = try Workspace()
        try workspace.publish(DeviceFlowTests.version1)
        let (server, url, serverLog) = try await workspace.serve()
        defer { stopProcess(server) }
        let deviceA = try DeviceProcess(workspace, sources: [url], name: "device-a")
        defer { deviceA.stop() }
        try await deviceA.waitForVersion(1)
        try workspace.publish(DeviceFlowTests.version2)
        #expect(try deviceA.cairn(["sync"]).status == 0)
        try await deviceA.waitForVersion(2)
        let requests = (try? String(contentsOfFile: serverLog, encoding: .utf8)) ?? ""
        #expect(!requests.contains(try workspace.blobs().snapshot), "device A should have taken the delta")

        // When device A exports, the snapshot is rebuilt from its index (onto a stick whose
        // mount point's name holds a space and a '#', which a URL must percent-encode).
        let export = workspace.folder + "/USB STICK #1"
        let exported = try deviceA.cairn(["export", "--to", export, "--json"])
        try #require(exported.status == 0, "export: \(exported.error)")
        let answer = try JSONSerialization.jsonObject(with: Data(exported.output.utf8)) as! [String: Any]
        #expect(answer["snapshot"] as? String == "rebuilt" && answer["version"] as? Int == 2)
        #expect(deviceA.log.contains("exported and read back"), "\(deviceA.log)")
        #expect(FileManager.default.fileExists(atPath: export + "/channels/field/versions/2.json"))

        // Then device B, with only the export as source, installs and answers the same.
        let deviceB = try DeviceProcess(workspace, sources: [SourceURL.forFolder(export)], name: "device-b")
        defer { deviceB.stop() }
        try await deviceB.waitForVersion(2)
        let fromA = try deviceA.query("sandbags pyramid"), fromB = try deviceB.query("sandbags pyramid")
        #expect(fromA.version == fromB.version && fromA.ids == fromB.ids)
        #expect(deviceA.status()["state_root"] as? String == deviceB.status()["state_root"] as? String)

        // Device B installed the full snapshot: its own export hands on the kept blob, and the
        // line it prints gives a --source that libcurl takes for that folder.
        let exportB = workspace.folder + "/usb b 100%"
        let again = try deviceB.cairn(["export", "--to", exportB])
        #expect(again.status == 0 && again.output.contains("(snapshot kept)"), "export from B: \(again.error)")
        #expect(again.output.hasSuffix("sync from it with --source file://\(workspace.folder)/usb%20b%20100%25\n"), "\(again.output)")

        // An export into a non-empty folder is refused in one line.
        let busy = try deviceA.cairn(["export", "--to", export])
        #expect(busy.status == 1 && busy.error.contains("export_target_not_empty"))
        // So is one onto a FIFO (or any file that is not a folder), which is left as it was.
        let fifo = workspace.folder + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        let notFolder = try deviceA.cairn(["export", "--to", fifo])
        #expect(notFolder.status == 1 && notFolder.error.contains("\(fifo) is not a folder") && notFolder.error.contains("bad_path"),
                "\(notFolder.error)")
        // An empty --to (an unset variable) is a usage error, not the working folder.
        let empty = try deviceA.cairn(["export", "--to", ""])
        #expect(empty.status == 2 && empty.error.contains("--to is empty"), "\(empty.error)")

        // When one byte of the exported snapshot is changed, device C refuses it and installs nothing.
        let tampered = workspace.folder + "/usb-tampered"
        #expect(try Binaries.run("/bin/cp", ["-a", export, tampered], in: workspace.folder).status == 0)
        let snapshot = try workspace.blobs().snapshot
        let blob = tampered + "/blobs/sha256/\(snapshot.prefix(2))/\(snapshot)"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: blob))
        bytes[bytes.count / 2] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: blob))
        let deviceC = try DeviceProcess(workspace, sources: ["file://" + tampered], name: "device-c")
        defer { deviceC.stop() }
        try await waitUntil("device C records a refusal", seconds: 60) {
            (Self.sync(deviceC)["last_error"] as? String)?.contains("SHA-256") == true
        }
        #expect(deviceC.status()["installed"] as? Bool == false)
    }
}
