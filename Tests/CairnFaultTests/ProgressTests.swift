import CairnTestSupport
import Foundation
import Testing

/// A sync in progress as callers see it: `sync.progress` in the status, and `cairn sync --wait`
/// following the attempt that answers its request, against a real cairnd syncing from the fault
/// server (which sends blobs at a set rate, or fails them).
@Suite("Sync progress: status and cairn sync --wait (real processes)", .offCooperativePool, .serialized)
struct ProgressTests {
    /// `cairn sync --wait` (and `arguments`) run to completion on its own thread.
    static func syncWait(_ rig: Rig, _ arguments: [String] = []) async throws -> Finished {
        try await run(Products.path("cairn"), ["--socket", rig.device.socket, "sync", "--wait"] + arguments)
    }

    /// Publishes the next version with blobs the fault server stalls after 100 bytes: the next
    /// attempt stays downloading (stall_timeout 600).
    static func publishStalled(_ rig: Rig) throws {
        _ = try rig.publishNext(bulk: 100_000)
        try rig.server.set(["stall_after": 100])
    }

    /// Until the device's attempt in progress is downloading.
    static func waitUntilDownloading(_ rig: Rig, _ what: String = "the attempt downloads") async throws {
        try await waitUntil(what, seconds: 60) {
            (rig.device.syncStatus["progress"] as? [String: Any])?["phase"] as? String == "downloading"
        }
    }

    @Test("Given a slow source, when `cairn sync --wait` runs, then status shows the download's phase, version, bytes done of total, rate and source, and sync --wait prints its steps and exits 0 once the new version answers")
    func followsADownload() async throws {
        let rig = try await Rig(config: ["stall_timeout": "600"])
        defer { rig.stop() }
        let new = try rig.publishNext(bulk: 200_000)
        // About 110 kB at 5 kB/s, held after the first 10 kB until the status polls (each a
        // `cairn status` process, JSON then text) have seen the download: however slowly a loaded
        // machine runs them, they look while it goes on. A download left to run its twenty
        // seconds unheld was once over before any poll landed in it (CI, 2026-12-07, 720 tests
        // on 2 cores).
        try rig.server.set(["rate": 5_000, "hold_after": 10_000])
        async let waited = Self.syncWait(rig)
        // Lifted on every way out: a failed wait below would else leave `cairn sync --wait`
        // (awaited before the rig stops) held until stall_timeout.
        defer { try? rig.server.set(["rate": 5_000]) }
        var seen: [String: Any] = [:]
        var text = ""
        try await waitUntil("status (JSON, then text) shows the download with its rate", seconds: 60) {
            guard let progress = rig.device.syncStatus["progress"] as? [String: Any], progress["phase"] as? String == "downloading",
                  progress["bytes_per_second"] as? NSNumber != nil else { return false }
            // `cairn status` says it in words while the download runs; a poll that reads the
            // text just after the download ended tries again.
            let words = (try? rig.device.cairn(["status"]))?.output ?? ""
            guard words.contains("downloading version \(new): ") else { return false }
            (seen, text) = (progress, words)
            return true
        }
        try rig.server.set(["rate": 5_000])  // the rest goes
        let done = seen["bytes_done"] as? Int ?? -1, total = seen["bytes_total"] as? Int ?? 0
        #expect(seen["version"] as? Int == new)
        // The bulk chunk is 200,000 bytes of random hex words: compressed, about half of that.
        #expect(total >= 80_000 && done > 0 && done <= total, "bytes \(done) of \(total)")
        let rate = (seen["bytes_per_second"] as? NSNumber)?.doubleValue ?? 0
        #expect(rate > 0 && rate < 4 * 5_000, "rate \(rate) for a source sending 5,000 bytes a second")
        #expect((seen["eta_seconds"] as? NSNumber).map { $0.doubleValue >= 0 } == true)
        #expect(seen["attempt"] as? Int == rig.device.syncStatus["attempts_started"] as? Int)
        #expect(seen["source"] as? String == rig.server.url, "\(String(describing: seen["source"]))")
        #expect(text.contains("syncing     attempt \(seen["attempt"] as? Int ?? 0) since ") && text.contains(" MB of ")
                && text.contains("(from \(rig.server.url))"), "\(text)")

        let finished = try await waited
        #expect(finished.status == 0, "\(finished.stderr)")
        // Not a terminal: one line per step on standard error; the outcome alone on standard
        // output (`out=$(cairn sync --wait)`), once the version answers.
        #expect(finished.stderr.contains("downloading version \(new)"), "\(finished.stderr)")
        #expect(finished.stdout == "installed version \(new); it answers queries\n", "\(finished.stdout)")
        #expect(rig.wrongAnswer(expecting: new) == nil)
        let sync = rig.device.syncStatus
        #expect(sync["progress"] is NSNull)
        #expect(sync["last_outcome"] as? String == "installed")
        #expect(sync["attempts_finished"] as? Int == sync["attempts_started"] as? Int)

        // Nothing newer: the next wait ends with the version being the newest.
        try rig.server.clear()
        let again = try await Self.syncWait(rig)
        #expect(again.status == 0 && again.stdout.hasSuffix("version \(new) is the newest\n"), "\(again.stdout)")
    }

    @Test("Given a source that fails or is too slow, when `cairn sync --wait` runs, then it exits 1 with the attempt's error in one line, or after --timeout (a stalled source) saying the attempt goes on, and the old version keeps answering")
    func failsAndTimesOut() async throws {
        let rig = try await Rig(config: ["stall_timeout": "600"])
        defer { rig.stop() }
        let new = try rig.publishNext(bulk: 100_000)

        try rig.server.set(["status": 500])
        let failed = try await Self.syncWait(rig)
        #expect(failed.status == 1)
        let line = failed.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(line.hasPrefix("cairn: sync failed (http_status): ") && line.contains("HTTP 500"), "\(failed.stderr)")
        #expect(rig.wrongAnswer(expecting: 1) == nil)

        // Held until the source recovers below: with stall_timeout 2, a wait starved past the
        // stall's two seconds on a loaded machine saw the attempt fail instead.
        try rig.server.set(["hold_after": 100])
        let slow = try await Self.syncWait(rig, ["--timeout", "1"])
        #expect(slow.status == 1)
        #expect(slow.stderr.contains("still syncing after 1.0 s; the attempt goes on"), "\(slow.stderr)")
        #expect(rig.wrongAnswer(expecting: 1) == nil)

        // The source recovers: waiting again follows the next attempt to its end, and the new
        // version answers (installed by that attempt, or by the one still running at the request,
        // whose delta stalled and whose full snapshot came once the fault was gone).
        try rig.server.clear()
        let recovered = try await Self.syncWait(rig)
        let last = recovered.stdout.split(separator: "\n").last.map(String.init) ?? ""
        #expect(recovered.status == 0, "\(recovered.stderr)")
        #expect(["installed version \(new); it answers queries", "version \(new) is the newest"].contains(last), "\(recovered.stdout)")
        #expect(rig.wrongAnswer(expecting: new) == nil)
    }

    @Test("Given `cairn sync --wait` following a stalled attempt, when cairnd is killed and starts again on the same socket meanwhile, then the wait ends with exit 1 saying cairnd restarted, rather than taking the new process's attempts for its own")
    func daemonRestartedDuringWait() async throws {
        let data = try TemporaryDirectory.make() + "/device"
        let rig = try await Rig(config: ["stall_timeout": "600"], dataDirectory: data)
        defer { rig.stop() }
        // Two attempts ended (the start-up one and this): the wait's attempt is the third.
        #expect(try rig.device.cairn(["sync"]).status == 0)
        try await waitUntil("the second attempt ends", seconds: 60) { rig.device.syncStatus["attempts_finished"] as? Int == 2 }
        try Self.publishStalled(rig)
        async let waited = Self.syncWait(rig)
        try await Self.waitUntilDownloading(rig, "the third attempt downloads")
        // Killed (a crash, the OOM killer): the attempt records no outcome. A cairnd stopped
        // with SIGTERM ends it as `cancelled`, which the wait reports as that attempt's failure.
        kill(rig.device.process.processIdentifier, SIGKILL)
        _ = try await waitForExit(rig.device.process)
        try rig.server.clear()
        let again = try DeviceProcess(rig.workspace, sources: [rig.server.url], name: "device", dataDirectory: data)
        defer { again.stop() }
        let finished = try await waited
        #expect(finished.status == 1 && finished.stderr.contains("cairnd restarted during the wait"), "\(finished.stdout) \(finished.stderr)")
    }

    @Test("Given `cairn sync --wait` following a stalled attempt, when cairnd is frozen (SIGSTOP: it takes connections but answers nothing), then the wait ends with exit 3 saying cairnd stopped answering, as when it cannot be reached, rather than exit 1 after a 60 s poll")
    func daemonHungDuringWait() async throws {
        let rig = try await Rig(config: ["stall_timeout": "600"])
        defer { rig.stop() }
        try Self.publishStalled(rig)
        async let waited = Self.syncWait(rig)
        try await Self.waitUntilDownloading(rig)
        let pid = rig.device.process.processIdentifier
        kill(pid, SIGSTOP)
        let finished = try await waited
        kill(pid, SIGCONT)
        #expect(finished.status == 3, "exit \(finished.status): \(finished.stderr)")
        let line = finished.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(line.hasPrefix("cairn: cairnd at \(rig.device.socket) took the request but did not answer within ")
                && line.hasSuffix("; cairnd stopped answering during the wait"), "\(finished.stderr)")
        try rig.server.clear()
    }

    @Test("Given `cairn sync --wait` following a stalled attempt, when it gets SIGINT (Ctrl-C), then it exits 130 saying only the wait ended, and cairnd's attempt goes on")
    func interruptedWait() async throws {
        let rig = try await Rig(config: ["stall_timeout": "600"])
        defer { rig.stop() }
        try Self.publishStalled(rig)
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let waiting = try launch(Products.path("cairn"), ["--socket", rig.device.socket, "sync", "--wait"], logDirectory: folder)
        // Its first progress line comes after the handler is in place.
        try await waitUntil("the wait shows the download", seconds: 60) {
            ((try? String(contentsOfFile: folder + "/daemon.log", encoding: .utf8)) ?? "").contains("downloading version")
        }
        kill(waiting.processIdentifier, SIGINT)
        #expect(try await waitForExit(waiting) == 130)
        let output = (try? String(contentsOfFile: folder + "/daemon.log", encoding: .utf8)) ?? ""
        #expect(output.hasSuffix("cairn: interrupted; the wait ended, cairnd's attempt goes on (`cairn status` shows it)\n"), "\(output)")
        #expect((rig.device.syncStatus["progress"] as? [String: Any])?["phase"] as? String == "downloading")
        try rig.server.clear()
    }

    @Test("Given a terminal 50 columns wide (a pseudo-terminal from script(1)), when `cairn sync --wait` follows a slow download, then each redrawn progress line fits in 49 columns, so it redraws in place instead of wrapping; with TERM=dumb it prints plain lines")
    func progressFitsTheTerminal() async throws {
        let script = try requireOrSkip(["/usr/bin/script", "/bin/script"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                       "script(1) is not installed (apt-get install bsdutils)")
        let rig = try await Rig()
        defer { rig.stop() }
        let new = try rig.publishNext(bulk: 200_000)
        try rig.server.set(["rate": 10_000])
        let command = "stty cols 50; exec '\(Products.path("cairn"))' --socket '\(rig.device.socket)' sync --wait"
        let finished = try await run(script, ["-qec", command, "/dev/null"])
        #expect(finished.status == 0, "\(finished.stderr)")
        // Each drawing starts with a carriage return and an erase of the line.
        let drawings = finished.stdout.components(separatedBy: "\r\u{1B}[K").dropFirst()
            .map { $0.components(separatedBy: "\r\n").first ?? $0 }.filter { !$0.isEmpty }
        #expect(drawings.contains { $0.contains("downloading version \(new)") }, "\(finished.stdout)")
        #expect(drawings.allSatisfy { $0.count <= 49 }, "\(drawings.map(\.count)) \(drawings)")
        #expect(finished.stdout.contains("installed version \(new); it answers queries"))

        // A terminal that cannot erase a line (TERM=dumb: Emacs's shell) gets the plain lines.
        let newer = try rig.publishNext(bulk: 200_000)
        let dumb = try await run(script, ["-qec", "export TERM=dumb; " + command, "/dev/null"])
        #expect(dumb.status == 0, "\(dumb.stderr)")
        #expect(!dumb.stdout.contains("\u{1B}[K") && dumb.stdout.contains("downloading version \(newer)")
                && dumb.stdout.contains("installed version \(newer); it answers queries"), "\(dumb.stdout)")
    }
}
