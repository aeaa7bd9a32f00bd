import ArgumentParser
import CairnClient
import CairnCommandLine
import Foundation
#if canImport(Glibc)
import Glibc
#endif

struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Ask cairnd to poll its sources now.",
        discussion: """
            Returns at once (see `cairn status`), or with --wait follows the attempt that answers \
            the request on every channel (a progress bar on a terminal, a line per step otherwise \
            or with TERM=dumb) and exits 0 once the newest version answers; 1 if the attempt \
            failed, --timeout passed or cairnd restarted; 3 if cairnd cannot be reached for 10 s \
            or --timeout when shorter (a cairnd just started is waited for) or answers nothing for two 10 s polls in a row; \
            130 on Ctrl-C, which ends only the wait.
            """)

    @OptionGroup var connection: ConnectionOptions
    @ParentCommand var root: CairnCommand
    @Flag(help: "Wait until the attempt ends, showing its progress.")
    var wait = false
    @Option(help: "With --wait: give up after this many seconds (the attempt goes on).")
    var timeout: Double?

    func validate() throws {
        if let timeout, timeout <= 0 || !timeout.isFinite { throw ValidationError("--timeout must be a positive number of seconds") }
        if timeout != nil && !wait { throw ValidationError("--timeout goes with --wait") }
    }

    func run() async throws {
        let daemon = DaemonConnection(root: root.connection, local: connection)
        // --timeout counts from here: the wait for a socket not reachable yet is part of it.
        let started = ContinuousClock.now
        let body = wait ? try await requestWhenReachable(daemon) : try daemon.call("POST", "/v1/sync", body: [])
        guard wait else {
            print("sync requested; `cairn status` shows the outcome")
            return
        }
        let accepted = try daemon.decode(Accepted.self, from: body)
        guard let attempts = accepted.attempts, !attempts.isEmpty else {
            daemon.fail("this cairnd does not number its sync attempts; upgrade it to use --wait")
            throw ExitCode(1)
        }
        try await follow(daemon, attempts: attempts, started: started)
    }

    /// With --wait, the request waits up to 10 s for a socket that cannot be reached yet: a
    /// cairnd started just before (`cairnd … & cairn sync --wait`) binds it within a moment, as
    /// one restarting does, which the wait rides out the same way (exit 3 after 10 s, or after
    /// --timeout when that is shorter).
    private func requestWhenReachable(_ daemon: DaemonConnection) async throws -> [UInt8] {
        let since = ContinuousClock.now
        while true {
            var failure: ClientError?
            if let body = try daemon.callIfReachable("POST", "/v1/sync", body: [], unreachable: { failure = $0 }) {
                return body
            }
            // Only a socket that is not there yet, or not listened on yet, can come: a path
            // this user may not use, or one too long, is said at once.
            let settled = [EACCES, EPERM, ENAMETOOLONG, ENOTDIR].contains((failure?.cause as? UnixSocket.Errno)?.code ?? 0)
            if ContinuousClock.now - since >= .seconds(min(10, timeout ?? 10)) || settled, let failure {
                daemon.failUnreachable(failure)
                throw ExitCode(3)
            }
            try await Task.sleep(for: .milliseconds(250))
        }
    }

    struct Accepted: Decodable {
        let attempts: [String: Int]?
    }

    /// Polls the status until every channel's attempt `attempts[channel]` has ended, drawing its
    /// progress, then prints each outcome; exits 1 when one failed or the timeout passed.
    private func follow(_ daemon: DaemonConnection, attempts: [String: Int], started: ContinuousClock.Instant) async throws {
        let display = SyncProgressDisplay(terminal: SyncProgressDisplay.drawsInPlace())
        // Every line said on the way out (here or by the connection) starts on a cleared line,
        // not after the progress bar.
        var daemon = daemon
        daemon.beforeFailing = {
            display.clear()
            fflush(nil)
        }
        // Ctrl-C: the progress line cleared, and one line saying that only the wait ended.
        let inPlace = display.drawsInPlace
        let interrupt = exitOnInterrupt(saying: "cairn: interrupted; the wait ended, cairnd's attempt goes on (`cairn status` shows it)") {
            if inPlace { writeStandardError("\r\u{1B}[K") }
        }
        defer { interrupt.cancel() }
        // Monotonic: a device's clock stepped by NTP during the wait must not end or stretch it.
        let deadline = timeout.map { started + .seconds(min($0, 1e9)) }
        let several = attempts.count > 1
        /// Each channel's ended attempts at the last poll: a count that goes back means cairnd
        /// restarted, and its numbers are a new process's.
        var finished: [String: Int] = [:]
        /// Each channel's started attempts: at least the one before ours when cairnd answered
        /// the request, so a new process seen at the first poll (a restart between the request
        /// and that poll) counts fewer and is told apart.
        var started = attempts.mapValues { $0 - 1 }
        /// Since when cairnd has not been reachable (nil while it answers). Not proof of a
        /// restart by itself: a busy cairnd's full backlog refuses a connection too.
        var gone: ContinuousClock.Instant?
        /// Polls in a row that cairnd took and did not answer within 10 s. Two count as a
        /// cairnd that has stopped answering (hung, or stopped): one alone may be a status slow
        /// under an install's disk load.
        var silent = 0
        /// Ends the wait: the progress line cleared, one line said, the exit code to throw.
        func stop(_ message: String, _ code: Int32 = 1) -> ExitCode {
            daemon.fail(message)
            return ExitCode(code)
        }
        while true {
            // A poll waits no longer than what is left of --timeout, nor than the 10 s after
            // which a cairnd that does not answer counts as stopped: one that is hung (stopped,
            // swapping) still takes connections, and the status answers at once otherwise.
            let left = deadline.map { max(1, min(10, ($0 - ContinuousClock.now) / .seconds(1))) } ?? 10
            var failure: ClientError?
            let polled = ContinuousClock.now
            guard let body = try daemon.callIfReachable("GET", "/v1/status", timeout: left, treating: [.unreachable, .noAnswer],
                                                        unreachable: { failure = $0 }) else {
                let reason = failure?.message ?? ""
                // A poll cut short by --timeout's end is no proof of silence: the deadline speaks then.
                if failure?.code == .noAnswer, left >= 10 {
                    silent += 1
                    guard silent < 2 else { throw stop("\(reason); cairnd stopped answering during the wait", 3) }
                } else if failure?.code != .noAnswer {
                    silent = 0
                    // cairnd restarting (`systemctl restart`) is back within seconds: the wait
                    // says so then, rather than that cairnd is not running.
                    let since = gone ?? polled
                    gone = since
                    guard ContinuousClock.now - since < .seconds(10) else { throw stop("\(reason); cairnd stopped answering during the wait", 3) }
                }
                if let deadline, ContinuousClock.now >= deadline {
                    throw stop("still syncing after \(timeout!) s (cairnd does not answer now: \(reason)); the attempt may go on")
                }
                try await Task.sleep(for: .milliseconds(250))
                continue
            }
            (gone, silent) = (nil, 0)
            let status = try daemon.decode(DaemonStatus.self, from: body)
            guard let listed = status.channels else {
                throw stop("cairnd's status lists no channels this cairn can read; are cairn and cairnd of one release?")
            }
            let channels = listed.filter { attempts[$0.channel] != nil }
            for channel in channels {
                let count = channel.attemptsFinished ?? 0
                // Started at least: those ended, and the one in progress.
                let begun = max(count, channel.progress?.attempt ?? 0)
                if count < finished[channel.channel] ?? 0 || begun < started[channel.channel] ?? 0 {
                    throw stop("cairnd restarted during the wait; the attempt's outcome is unknown (`cairn status` shows the newest)")
                }
                finished[channel.channel] = count
                started[channel.channel] = begun
            }
            let pending = channels.filter { ($0.attemptsFinished ?? 0) < attempts[$0.channel]! }
            if pending.isEmpty && channels.count == attempts.count {
                display.clear()
                var failed = false
                for channel in channels.sorted(by: { $0.channel < $1.channel }) {
                    let prefix = several ? "[\(channel.channel)] " : ""
                    switch channel.lastOutcome {
                    case "installed": print(prefix + "installed version \(channel.version ?? 0); it answers queries")
                    case "up_to_date": print(prefix + (channel.version.map { "version \($0) is the newest" } ?? "nothing published yet"))
                    default:
                        failed = true
                        fflush(nil)
                        daemon.fail(prefix + "sync failed (\(channel.lastOutcome ?? "unknown")): \(channel.lastError ?? "see cairnd's log")")
                    }
                }
                if failed { throw ExitCode(1) }
                return
            }
            display.show(pending.map { (several ? "[\($0.channel)] " : "", $0.progress, $0.requestHeldUntil) })
            if let deadline, ContinuousClock.now >= deadline {
                // An export or rollback holds the syncer: the attempt has not begun.
                if let busy = pending.lazy.compactMap(\.operation).first {
                    throw stop("still waiting after \(timeout!) s: cairnd is \(busy.kind == "export" ? "exporting" : "rolling back") since \(busy.started), and the attempt starts once that ends")
                }
                if let held = pending.lazy.compactMap(\.requestHeldUntil).first {
                    throw stop("still waiting after \(timeout!) s: \(SyncProgressDisplay.held(held)); the request stands")
                }
                throw stop("still syncing after \(timeout!) s; the attempt goes on (`cairn status` shows it)")
            }
            try await Task.sleep(for: .milliseconds(250))
        }
    }
}

/// How `cairn sync --wait` shows progress, on standard error (standard output carries only each
/// attempt's outcome, for `out=$(cairn sync --wait)`): one line redrawn in place on a terminal,
/// else a line each time the phase changes or a download passes another tenth.
final class SyncProgressDisplay {
    private let terminal: Bool
    /// Whether progress is drawn in place (a line to erase on the way out).
    var drawsInPlace: Bool { terminal }
    private var last = ""
    private var drawn = false

    init(terminal: Bool) { self.terminal = terminal }

    /// Whether progress is one line redrawn in place: standard error is a terminal that
    /// understands the erase sequence (not `TERM=dumb`, as in Emacs's shell).
    static func drawsInPlace(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        isatty(STDERR_FILENO) == 1 && environment["TERM"] != "dumb"
    }

    /// Why a requested attempt has not started, from status's `request_held_until`.
    static func held(_ until: String) -> String {
        "requested syncs come faster than cairnd starts them (sync_request_interval), and the attempt starts at \(until)"
    }

    /// What a channel shows before its attempt starts.
    private static func notStarted(_ heldUntil: String?) -> String {
        "waiting for the attempt to start" + (heldUntil.map { ": " + held($0) } ?? "")
    }

    func show(_ channels: [(prefix: String, progress: DaemonStatus.Progress?, heldUntil: String?)]) {
        if terminal {
            let line = channels.map { $0.prefix + ($0.progress.map { Self.bar($0) } ?? Self.notStarted($0.heldUntil)) }
                .joined(separator: "  ")
            // Cut to the terminal's width: a line that wraps is not redrawn in place (the
            // carriage return goes back to its last row only), and a new one scrolled out with
            // every poll.
            writeStandardError("\r\u{1B}[K\(Self.fit(line, columns: Self.terminalColumns()))")
            drawn = true
        } else {
            // The coarse form: phase, version and tenths of the download.
            let line = channels.map { $0.prefix + ($0.progress.map { Self.step($0) } ?? Self.notStarted($0.heldUntil)) }
                .joined(separator: "; ")
            if line != last { writeStandardError(line + "\n") }
            last = line
        }
    }

    /// The columns of the terminal on standard error (0 when it does not say).
    static func terminalColumns() -> Int {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0 else { return 0 }
        return Int(size.ws_col)
    }

    /// `line` shortened to fit `columns` (an ellipsis at the end); as it is when it fits or the
    /// width is unknown (0).
    static func fit(_ line: String, columns: Int) -> String {
        guard columns > 1, line.count >= columns else { return line }
        return String(line.prefix(columns - 2)) + "…"
    }

    func clear() {
        if terminal && drawn { writeStandardError("\r\u{1B}[K") }
        drawn = false
    }

    static func step(_ progress: DaemonStatus.Progress) -> String {
        var line = "attempt \(progress.attempt): " + head(progress)
        if progress.phase == "downloading", let total = progress.bytesTotal, total > 0 {
            line += ", \(min(100, progress.bytesDone * 10 / total * 10))%"
        }
        return line
    }

    /// The terminal line: `downloading version 12 [#####...............] 12.3 MB of 45.6 MB (27%), …`.
    static func bar(_ progress: DaemonStatus.Progress) -> String {
        var line = head(progress)
        if progress.phase == "downloading", let total = progress.bytesTotal, total > 0 {
            let filled = Int(min(20, progress.bytesDone * 20 / total))
            line += " [" + String(repeating: "#", count: filled) + String(repeating: ".", count: 20 - filled) + "]"
        }
        return details(progress).map { line + " " + $0 } ?? line
    }

    /// `downloading version 12: 12.3 MB of 45.6 MB (27%), 1.2 MB/s, about 28 s left` (`cairn status`).
    static func describe(_ progress: DaemonStatus.Progress) -> String {
        details(progress).map { head(progress) + ": " + $0 } ?? head(progress)
    }

    static func head(_ progress: DaemonStatus.Progress) -> String {
        progress.phase + (progress.version.map { " version \($0)" } ?? "") + (progress.waiting.map { ", waiting for \($0)" } ?? "")
    }

    /// The bytes, rate and time left; nil while checking.
    static func details(_ progress: DaemonStatus.Progress) -> String? {
        guard progress.phase != "checking" else { return nil }
        var line = megabytes(progress.bytesDone)
        if let total = progress.bytesTotal, total > 0 {
            line += " of \(megabytes(total)) (\(progress.bytesDone * 100 / total)%)"
        }
        if progress.phase == "downloading" {
            if let rate = progress.bytesPerSecond { line += ", \(megabytes(Int64(rate)))/s" }
            if let eta = progress.etaSeconds { line += ", about \(Int(eta.rounded())) s left" }
        }
        return line
    }

    static func megabytes(_ bytes: Int64) -> String {
        String(format: "%.1f MB", Double(bytes) / 1_000_000)
    }
}
