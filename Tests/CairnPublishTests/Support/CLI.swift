import CairnTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The built `cairn-server`, run as a real process with files (not pipes) for its output.
enum CLI {
    /// The `cairn-server` built with these tests (never another build's, which may be stale).
    static let binary = Products.path("cairn-server")

    /// A started process with its output files.
    final class Running {
        let process: Process
        let outputPath: String
        let errorPath: String

        init(process: Process, outputPath: String, errorPath: String) {
            self.process = process
            self.outputPath = outputPath
            self.errorPath = errorPath
        }

        var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }
        var error: String { (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "" }

        /// Polls standard error until it contains `text` or `timeout` seconds pass.
        func waitForError(containing text: String, timeout: Double = 60) -> Bool {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if error.contains(text) { return true }
                if !process.isRunning { return error.contains(text) }
                usleep(20_000)
            }
            return false
        }

        /// SIGKILL and reap; once reaped, nothing (its pid may be another process's by then).
        func kill() {
            guard process.isRunning else { return }
            Glibc.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }

        func wait() -> Int32 {
            process.waitUntilExit()
            return process.terminationStatus
        }
    }

    static func start(_ arguments: [String], environment: [String: String] = [:]) throws -> Running {
        let folder = try TemporaryDirectory.make()
        let out = folder + "/out", err = folder + "/err"
        FileManager.default.createFile(atPath: out, contents: nil)
        FileManager.default.createFile(atPath: err, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        // The developer's CAIRN_* variables do not reach the child; the test's own do.
        process.environment = childEnvironment(environment)
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        process.standardOutput = FileHandle(forWritingAtPath: out)
        process.standardError = FileHandle(forWritingAtPath: err)
        try process.spawn()
        return Running(process: process, outputPath: out, errorPath: err)
    }

    /// Runs to completion: exit status, standard output, standard error.
    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String, error: String) {
        let running = try start(arguments, environment: environment)
        try ProcessDeadline(running.process, seconds: ProcessDeadline.defaultSeconds).wait(what: "cairn-server")
        return (running.process.terminationStatus, running.output, running.error)
    }

    /// `publish` arguments for a workspace.
    static func publishArguments(_ workspace: Workspace, source: String, extra: [String] = []) -> [String] {
        ["publish", "--repo", workspace.repo, "--channel", "stable", "--source", source,
         "--key", workspace.keyDir + "/publisher.key", "--model-dir", workspace.modelDir,
         "--cache", workspace.cachePath] + extra
    }
}
