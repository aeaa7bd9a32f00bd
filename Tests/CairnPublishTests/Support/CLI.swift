import CairnTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The built `cairn-server`, run as a real process with files (not pipes) for its output.
enum CLI {
    /// The build products folder: the first folder at or above the test bundle that holds a
    /// `cairn-server` executable, else `<package>/.build-publish/debug`.
    static let binary: String = {
        var folder = URL(fileURLWithPath: Bundle.main.bundlePath)
        for _ in 0..<4 {
            let candidate = folder.appendingPathComponent("cairn-server").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            folder.deleteLastPathComponent()
        }
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { root.deleteLastPathComponent() }
        return root.path + "/.build-publish/debug/cairn-server"
    }()

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

        func kill() {
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
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        process.standardOutput = FileHandle(forWritingAtPath: out)
        process.standardError = FileHandle(forWritingAtPath: err)
        try process.run()
        return Running(process: process, outputPath: out, errorPath: err)
    }

    /// Runs to completion: exit status, standard output, standard error.
    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String, error: String) {
        let running = try start(arguments, environment: environment)
        let status = running.wait()
        return (status, running.output, running.error)
    }

    /// `publish` arguments for a workspace.
    static func publishArguments(_ workspace: Workspace, source: String, extra: [String] = []) -> [String] {
        ["publish", "--repo", workspace.repo, "--channel", "stable", "--source", source,
         "--key", workspace.keyDir + "/publisher.key", "--model-dir", workspace.modelDir,
         "--cache", workspace.cachePath] + extra
    }
}
