import CairnClient
import Foundation

/// The real `cairnd` binary (the one beside the running `cairn`), started for one evaluation
/// with its own data directory and socket, its log in `DATA/cairnd.log`.
final class DaemonProcess: @unchecked Sendable {
    // @unchecked: its fields are constants; `stop` may run on a signal's thread beside the
    // evaluation's (Process's terminate and waitUntilExit may be called from any thread).
    let socketPath: String
    let logPath: String
    private let process = Process()
    /// Guards `stopped` and the start against `stop` on a signal's thread.
    private let lock = NSLock()
    /// `stop` ran: `start` starts nothing.
    private var stopped = false

    /// Prepares cairnd with `arguments` added to `--data-dir DATA --socket SOCKET`; `start`
    /// starts it. Two steps, so that the interruption's handler can be set to stop it before it
    /// runs: set after, a SIGINT in between left cairnd running with no one to stop it.
    init(dataDirectory: String, socketPath: String, arguments: [String]) throws(EvalFailure) {
        self.socketPath = socketPath
        logPath = dataDirectory + "/cairnd.log"
        let executable = Self.cairndPath()
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw .daemon("cannot find cairnd beside cairn (\(executable)); build both products")
        }
        // The data directory first: the log lives in it, and a log file that cannot be
        // created would send cairnd's output nowhere (no reason for a failure, none kept).
        do { try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true) } catch {
            throw .io("cannot create \(dataDirectory): \(error.localizedDescription)")
        }
        guard FileManager.default.createFile(atPath: logPath, contents: nil) else { throw .io("cannot create \(logPath)") }
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--data-dir", dataDirectory, "--socket", socketPath] + arguments
        process.standardOutput = FileHandle(forWritingAtPath: logPath)
        process.standardError = FileHandle(forWritingAtPath: logPath)
    }

    /// Starts cairnd, unless `stop` came first.
    func start() throws(EvalFailure) {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return }
        do { try process.run() } catch { throw .daemon("cannot start \(Self.cairndPath()): \(error)") }
    }

    /// `cairnd` in the folder of `/proc/self/exe`.
    static func cairndPath() -> String {
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("cairnd").path
    }

    /// Polls `GET /v1/status` until it reports `version`, printing progress, or fails at the deadline.
    func waitForVersion(_ version: Int, deadline seconds: Double) async throws(EvalFailure) {
        let client = UnixHTTPClient(socketPath: socketPath, timeout: 10)
        let start = Date()
        var lastReport = start, lastState = "not answering yet"
        while Date().timeIntervalSince(start) < seconds {
            guard process.isRunning else {
                throw .daemon("cairnd exited with status \(process.terminationStatus) before installing version \(version)\(logTail)")
            }
            if let response = try? client.send(method: "GET", path: "/v1/status"), response.status == 200,
               let status = try? JSONDecoder().decode(DaemonStatus.self, from: Data(response.body)) {
                if status.version == version {
                    guard status.modelLoaded else { throw .daemon("cairnd serves version \(version) without its model\(logTail)") }
                    return
                }
                lastState = (status.version.map { "serving version \($0)" } ?? "no version installed")
                    + (status.sync.lastError.map { ", last sync error: \($0)" } ?? "")
            }
            if Date().timeIntervalSince(lastReport) >= 5 {
                progress(String(format: "waiting for cairnd to install version %d (%.0f s; %@)", version,
                                Date().timeIntervalSince(start), lastState))
                lastReport = Date()
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
        throw .daemon("cairnd did not install version \(version) within \(Int(seconds)) s (\(lastState))\(logTail)")
    }

    /// Polls `GET /v1/status` until every channel in `names` serves a version (they publish version 1).
    func waitForChannels(_ names: [String], deadline seconds: Double) async throws(EvalFailure) {
        guard !names.isEmpty else { return }
        let client = UnixHTTPClient(socketPath: socketPath, timeout: 10)
        let start = Date()
        while Date().timeIntervalSince(start) < seconds {
            guard process.isRunning else { throw .daemon("cairnd exited with status \(process.terminationStatus)\(logTail)") }
            if let response = try? client.send(method: "GET", path: "/v1/status"), response.status == 200,
               let status = try? JSONDecoder().decode(DaemonStatus.self, from: Data(response.body)),
               names.allSatisfy({ name in status.channels?.contains { $0.channel == name && $0.version != nil } == true }) {
                return
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
        throw .daemon("cairnd did not install channels \(names.joined(separator: ", ")) within \(Int(seconds)) s\(logTail)")
    }

    /// The last line of cairnd's log (the log itself is removed with the temporary folder
    /// unless --keep), for failure messages.
    private var logTail: String {
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        guard let last = text.split(whereSeparator: \.isNewline).last else { return "" }
        return "; cairnd's last log line: " + last.suffix(300)
    }

    /// SIGTERM, then waits for the exit (cairnd shuts down gracefully).
    func stop() {
        lock.lock()
        stopped = true
        let running = process.isRunning
        if running { process.terminate() }
        lock.unlock()
        if running { process.waitUntilExit() }
    }

    deinit { stop() }
}
