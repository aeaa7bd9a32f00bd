import CairnClient
import CairnTestSupport
import Foundation
import Testing

/// cairnd under a service manager: systemd's notify protocol, read from a real `NOTIFY_SOCKET`
/// datagram socket that the test binds, as systemd would.
@Suite("Operations: systemd readiness, status and watchdog (real processes)", .offCooperativePool, .serialized)
struct OperationsTests {
    @Test("Given NOTIFY_SOCKET and WATCHDOG_USEC, when cairnd starts and syncs, then it sends READY=1 with a status once it answers, STATUS= after each attempt, and WATCHDOG=1 repeatedly")
    func systemdNotify() async throws {
        let notify = try NotifySocket(path: try TemporaryDirectory.make() + "/notify.sock")
        defer { notify.close() }
        let rig = try await ServedDevice(environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "400000"])
        defer { rig.stop() }
        let device = rig.device

        try await waitUntil("cairnd says READY=1 and reports its first sync", seconds: 30) {
            let all = notify.messages
            return all.contains { $0.hasPrefix("READY=1\nSTATUS=answering queries") }
                && all.contains("STATUS=installed version 1; answering queries")
        }
        // READY=1 comes when the socket answers: by then status answers too.
        #expect(device.status()["version"] as? Int == 1)
        #expect(try device.cairn(["sync"]).status == 0)
        try await waitUntil("a second attempt reports the newest version", seconds: 30) {
            notify.messages.contains("STATUS=version 1 is the newest; answering queries")
        }
        try await waitUntil("the watchdog is fed more than once", seconds: 30) {
            notify.messages.filter { $0 == "WATCHDOG=1" }.count >= 3
        }
        // When the server goes away, the status line says the sync failed and what still answers.
        stopProcess(rig.server)
        #expect(try device.cairn(["sync"]).status == 0)
        try await waitUntil("a failed attempt is reported", seconds: 30) {
            notify.messages.contains { $0.hasPrefix("STATUS=sync failed (network:") && $0.hasSuffix("answering from version 1") }
        }
    }
}

extension OperationsTests {
    @Test("Given cairnd stopped (SIGSTOP: it takes connections but answers nothing), when cairn rollback and cairn export run, then each exits 3 within seconds saying cairnd is stopped or hung and nothing was asked of it, not after an hour")
    func longRequestsToAStoppedDaemon() async throws {
        let rig = try await ServedDevice()
        defer { rig.stop() }
        let device = rig.device
        kill(device.process.processIdentifier, SIGSTOP)
        defer { kill(device.process.processIdentifier, SIGCONT) }
        for arguments in [["rollback"], ["export", "--to", rig.workspace.folder + "/stick"]] {
            // Binaries.run's own deadline (seconds: 60) fails the test if the call waits longer.
            let run = try await onThread { try Binaries.run("cairn", ["--socket", device.socket] + arguments, in: rig.workspace.folder, seconds: 60) }
            #expect(run.status == 3, "\(arguments): exit \(run.status), \(run.error)")
            #expect(run.error.contains("did not answer within 10 s: it is stopped, hung, or every connection it takes (max_connections) is held; nothing was asked of it"), "\(run.error)")
        }
        kill(device.process.processIdentifier, SIGCONT)
        #expect(try device.cairn(["status"]).status == 0)
        #expect(device.syncStatus["held_back_version"] == nil || device.syncStatus["held_back_version"] is NSNull)
    }

    @Test("Given WATCHDOG_USEC and a client holding cairnd's only connection (max_connections = 1: a cairnd busy with clients, not hung), when the watchdog checks it, then it is still fed, since the check needs no connection of its own")
    func watchdogFedWhileConnectionsAreFull() async throws {
        let notify = try NotifySocket(path: try TemporaryDirectory.make() + "/notify.sock")
        defer { notify.close() }
        // Checks every 2 s, each allowed 2 s (at 0.5 s a loaded 2-core run could starve a loop
        // that long, and the check said so as a hang would); a connection held idle is not cut
        // for an hour.
        let rig = try await ServedDevice(environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "8000000"],
                                         config: ["max_connections": "1", "idle_timeout": "3600"])
        defer { rig.stop() }
        let device = rig.device
        func fed() -> Int { notify.messages.filter { $0 == "WATCHDOG=1" }.count }
        try await waitUntil("the watchdog is fed") { fed() > 0 }
        let held = try UnixSocket.connect(device.socket).get()
        defer { close(held) }
        // Once cairnd has taken it, a new connection waits in the queue (what a check through
        // the socket would do, and did until 2026-12-06).
        try await waitUntil("a new connection is no longer answered", seconds: 30) {
            (try? UnixHTTPClient(socketPath: device.socket, timeout: 1).send(method: "GET", path: "/healthz")) == nil
        }
        let before = fed()
        try await waitUntil("the watchdog is fed twice more", seconds: 60) { fed() >= before + 2 }
        #expect(!device.log.contains("not feeding systemd's watchdog"), "\(device.log)")
    }

    /// The soft and hard limits on open descriptors of process `pid`, from /proc.
    static func descriptorLimits(_ pid: Int32) throws -> (soft: String, hard: String) {
        let limits = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        let line = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
        let fields = line.dropFirst("Max open files".count).split(separator: " ")
        return (String(fields[0]), String(fields[1]))
    }

    @Test("Given cairnd started with a soft limit of 300 descriptors under a higher hard one, then it runs at the hard limit; under a hard limit of 300 with max_connections 256, it says so in one warning and serves 44 connections at once, so that its index and downloads keep descriptors to open")
    func descriptorLimit() async throws {
        let hard = try Self.descriptorLimits(getpid()).hard
        try requireOrSkip(Int(hard).map { $0 > 600 } ?? true, "this machine's hard limit on descriptors (\(hard)) leaves no room above 300")
        let raised = try await ServedDevice(wrapper: ["/bin/sh", "-c", #"ulimit -Sn 300 && exec "$0" "$@""#])
        defer { raised.stop() }
        let limits = try Self.descriptorLimits(raised.device.process.processIdentifier)
        #expect(limits.soft == hard && limits.hard == hard, "\(limits)")
        #expect(!raised.device.log.contains("max_connections"), "\(raised.device.log)")

        let capped = try await ServedDevice(config: ["idle_timeout": "3600"], wrapper: ["/bin/sh", "-c", #"ulimit -n 300 && exec "$0" "$@""#])
        defer { capped.stop() }
        let device = capped.device
        #expect(device.log.contains("max_connections 256 leaves too few of the 300 descriptors this process may open") && device.log.contains("serving 44 at once"), "\(device.log)")
        #expect(device.log.components(separatedBy: "max_connections 256 leaves").count == 2, "one warning: \(device.log)")
        var held: [Int32] = []
        defer { held.forEach { close($0) } }
        for _ in 0..<44 { held.append(try UnixSocket.connect(device.socket).get()) }
        try await waitUntil("a 45th connection is no longer answered", seconds: 30) {
            (try? UnixHTTPClient(socketPath: device.socket, timeout: 1).send(method: "GET", path: "/healthz")) == nil
        }
        close(held.removeLast())
        try await waitUntil("one freed, a new connection is answered", seconds: 30) {
            (try? UnixHTTPClient(socketPath: device.socket, timeout: 1).send(method: "GET", path: "/healthz")) != nil
        }
    }

    @Test("Given cairn-server serve (16 connections) started with a soft limit of 300 descriptors under a higher hard one, then it runs at the hard limit without a warning; under a hard limit of 300 with max_connections 1024, it says so in one warning and serves 22 connections at once (two descriptors each: the socket and the file it sends)")
    func serverDescriptorLimit() async throws {
        let hard = try Self.descriptorLimits(getpid()).hard
        try requireOrSkip(Int(hard).map { $0 > 600 } ?? true, "this machine's hard limit on descriptors (\(hard)) leaves no room above 300")
        let workspace = try Workspace()
        try workspace.publish(Workspace.version1)
        // 16 connections: the 1,024 of the default would not fit every machine's hard limit.
        let few = workspace.folder + "/few.conf"
        try "max_connections = 16\n".write(toFile: few, atomically: true, encoding: .utf8)
        let raised = try await workspace.serve(arguments: ["--config", few], wrapper: ["/bin/sh", "-c", #"ulimit -Sn 300 && exec "$0" "$@""#])
        let limits = try Self.descriptorLimits(raised.0.processIdentifier)
        stopProcess(raised.0)
        #expect(limits.soft == hard && limits.hard == hard, "\(limits)")
        #expect(!(try String(contentsOfFile: raised.log, encoding: .utf8)).contains("max_connections"))

        let config = workspace.folder + "/serve.conf"
        try "idle_timeout_seconds = 3600\n".write(toFile: config, atomically: true, encoding: .utf8)
        let (server, url, log) = try await workspace.serve(arguments: ["--config", config], wrapper: ["/bin/sh", "-c", #"ulimit -n 300 && exec "$0" "$@""#])
        defer { stopProcess(server) }
        let text = try String(contentsOfFile: log, encoding: .utf8)
        #expect(text.contains("max_connections 1024 leaves too few of the 300 descriptors this process may open") && text.contains("serving 22 at once"), "\(text)")
        #expect(text.components(separatedBy: "max_connections 1024 leaves").count == 2, "one warning: \(text)")
        let port = try #require(Int(url.split(separator: ":").last ?? ""))
        var held: [Int32] = []
        defer { held.forEach { close($0) } }
        for _ in 0..<22 { held.append(try #require(connectTCP(port))) }
        // curl's exit: 0 answered, 28 connected (the listen queue takes it) but not answered in time.
        let get = { () async -> Int32? in
            try? await CairnTestSupport.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "--max-time", "2", url + "/channels/field/manifest.json"]).status
        }
        try await waitUntil("a 23rd connection is no longer answered", seconds: 30) { await get() == 28 }
        close(held.removeLast())
        try await waitUntil("one freed, a new connection is answered", seconds: 30) { await get() == 0 }
    }

    @Test("Given a NOTIFY_SOCKET that nobody reads and a watchdog every millisecond, when cairnd starts, syncs and is queried, then it serves, answers and installs the next version")
    func busyManagerDoesNotStall() async throws {
        // The queue of an unread datagram socket holds net.unix.max_dgram_qlen notices (10 by
        // default); a watchdog every millisecond fills it at once, and a send that waited for room
        // would hold one of cairnd's threads for good.
        let notify = try NotifySocket(path: try TemporaryDirectory.make() + "/notify.sock", draining: false)
        defer { notify.close() }
        let rig = try await ServedDevice(environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "2000"])
        defer { rig.stop() }
        let device = rig.device
        for _ in 0..<4 { #expect(try device.query("boil water", mode: "lexical").ids.isEmpty == false) }
        try rig.workspace.publish(Workspace.version2)
        #expect(try device.cairn(["sync"]).status == 0)
        try await device.waitForVersion(2)
        #expect(try device.query("boil water").version == 2)
    }

    /// `GET /metrics` on the device's socket.
    static func scrape(_ device: DeviceProcess) async throws -> String {
        try Tools.requireCurl()
        let run = try await CairnTestSupport.run("/usr/bin/curl", ["-sS", "--unix-socket", device.socket, "http://localhost/metrics"])
        guard run.status == 0 else { throw StepFailed("curl /metrics: \(run.stderr)") }
        return run.stdout
    }

    /// The value of the series `name` whose labels include every one of `labels` (`key="value"`).
    static func value(_ text: String, _ name: String, _ labels: [String] = []) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
            let parts = line.split(separator: " ")
            if labels.allSatisfy({ parts[0].contains($0) }), let value = parts.last.flatMap({ Double($0) }) { return value }
        }
        return nil
    }

    @Test("Given a device with version 1, when it is queried, fails a query, gets a body too large and one broken off, and syncs, then /metrics counts queries by mode and outcome (the two bodies apart), attempts by outcome, bytes by path, and reports the version and freshness")
    func metricsMove() async throws {
        let rig = try await ServedDevice()
        defer { rig.stop() }
        let (workspace, device) = (rig.workspace, rig.device)

        try await waitUntil("the first install is counted", seconds: 30) {
            let text = (try? await Self.scrape(device)) ?? ""
            return Self.value(text, "cairnd_sync_attempts_total", [#"outcome="installed""#]) == 1
        }
        let before = try await Self.scrape(device)
        #expect(Self.value(before, "cairnd_installed_version", [#"channel="field""#]) == 1)
        #expect((Self.value(before, "cairnd_downloaded_bytes_total", [#"path="full""#]) ?? 0) > 0)
        #expect(Self.value(before, "cairnd_online") == 1 && Self.value(before, "cairnd_stale") == 0)
        #expect((Self.value(before, "cairnd_seconds_since_last_check") ?? -1) >= 0)
        let okBefore = Self.value(before, "cairnd_queries_total", [#"mode="lexical""#, #"outcome="ok""#]) ?? 0

        _ = try device.query("boil water", mode: "lexical")
        _ = try device.query("boil water", mode: "lexical")
        let bad = try await CairnTestSupport.run("/usr/bin/curl", ["-s", "--unix-socket", device.socket, "http://localhost/v1/search",
                                                                    "-d", #"{"query":"boil","k":0}"#])
        #expect(bad.stdout.contains("bad_k"))
        // A chunked body past the limit is too large; one whose client hangs up before its
        // end broke off, which is not the same fault.
        let large = workspace.folder + "/large.json"
        try Data((#"{"query":""# + String(repeating: "a", count: 70_000) + #""}"#).utf8).write(to: URL(fileURLWithPath: large))
        let tooLarge = try await CairnTestSupport.run("/usr/bin/curl", ["-s", "--unix-socket", device.socket, "http://localhost/v1/search",
                                                                         "-H", "Transfer-Encoding: chunked", "-H", "Content-Type: application/json",
                                                                         "--data-binary", "@" + large])
        #expect(tooLarge.stdout.contains("body_too_large"), "\(tooLarge.stdout)")
        let hangUp = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
            s.sendall(b"POST /v1/search HTTP/1.1\\r\\nHost: localhost\\r\\nContent-Type: application/json\\r\\nContent-Length: 100\\r\\n\\r\\n{\\"query\\":")
            s.close()
            """
        #expect(try await CairnTestSupport.run("/usr/bin/python3", ["-c", hangUp, device.socket]).status == 0)
        try await waitUntil("the broken-off body is counted", seconds: 30) {
            let text = (try? await Self.scrape(device)) ?? ""
            return Self.value(text, "cairnd_queries_total", [#"mode="unknown""#, #"outcome="bad_request""#]) == 1
        }
        try workspace.publish(Workspace.version2)
        #expect(try device.cairn(["sync"]).status == 0)
        try await device.waitForVersion(2)

        try await waitUntil("the second install is counted", seconds: 30) {
            let text = (try? await Self.scrape(device)) ?? ""
            return Self.value(text, "cairnd_sync_attempts_total", [#"outcome="installed""#]) == 2
        }
        let after = try await Self.scrape(device)
        #expect(Self.value(after, "cairnd_queries_total", [#"mode="lexical""#, #"outcome="ok""#]) == okBefore + 2)
        #expect(Self.value(after, "cairnd_queries_total", [#"mode="hybrid""#, #"outcome="bad_k""#]) == 1)
        #expect(Self.value(after, "cairnd_queries_total", [#"mode="unknown""#, #"outcome="body_too_large""#]) == 1)
        #expect((Self.value(after, "cairnd_query_duration_seconds_count", [#"mode="lexical""#]) ?? 0) >= 2)
        #expect((Self.value(after, "cairnd_downloaded_bytes_total", [#"path="delta""#]) ?? 0) > 0)
        #expect(Self.value(after, "cairnd_installed_version") == 2)
    }
}
