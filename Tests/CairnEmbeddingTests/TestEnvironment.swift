import CairnTestSupport
import Foundation
import Testing

/// Where the test suite finds what lies outside the package: the real model, the Python
/// reference venv and the shared test collections. A test missing one of them skips or fails
/// through `requireOrSkip` (CairnTestSupport).
enum TestEnvironment {
    static let environment = ProcessInfo.processInfo.environment

    /// The repository's root folder (three levels above this file).
    static let repositoryRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// `../shared/data` beside the checkout, when present (CI has it).
    static let sharedData: String? = {
        let path = (repositoryRoot as NSString).deletingLastPathComponent + "/shared/data"
        return FileManager.default.fileExists(atPath: path) ? path : nil
    }()

    /// The Python of the reference venv (scripts/test sets CAIRN_PYTHON).
    static var python: String? {
        environment["CAIRN_PYTHON"].flatMap { FileManager.default.isExecutableFile(atPath: $0) ? $0 : nil }
    }

    /// Runs `executable` with `arguments`, feeding `input` on standard input; returns standard
    /// output. Files, not pipes, so that a large input and output cannot deadlock.
    static func run(_ executable: String, _ arguments: [String], input: Data = Data(),
                    environment extra: [String: String] = [:]) throws -> (status: Int32, output: Data, error: String) {
        let folder = NSTemporaryDirectory() + "cairn-run-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let files = (input: folder + "/in", output: folder + "/out", error: folder + "/err")
        try input.write(to: URL(fileURLWithPath: files.input))
        FileManager.default.createFile(atPath: files.output, contents: nil)
        FileManager.default.createFile(atPath: files.error, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = Self.environment.merging(extra) { $1 }
        process.standardInput = FileHandle(forReadingAtPath: files.input)
        process.standardOutput = FileHandle(forWritingAtPath: files.output)
        process.standardError = FileHandle(forWritingAtPath: files.error)
        try process.spawn()
        process.waitUntilExit()
        let output = try Data(contentsOf: URL(fileURLWithPath: files.output))
        let error = (try? String(contentsOfFile: files.error, encoding: .utf8)) ?? ""
        return (process.terminationStatus, output, error)
    }

    /// JSONL `{"text": …}` lines for the reference scripts.
    static func jsonLines(_ texts: [String]) throws -> Data {
        var data = Data()
        for text in texts {
            data.append(try JSONSerialization.data(withJSONObject: ["text": text]))
            data.append(UInt8(ascii: "\n"))
        }
        return data
    }
}
