import Foundation

/// The built executables, run as real processes with files (not pipes) for their output.
public enum Binaries {
    /// The build products folder (beside the test bundle).
    public static let folder = Products.directory.path

    /// Runs `name` to completion: exit status, standard output, standard error. With
    /// `environment`, the child gets the test's environment without CAIRN_* and with these.
    /// Past `seconds` it is killed and `ProcessTimedOut` thrown.
    public static func run(_ name: String, _ arguments: [String], in workspace: String, environment: [String: String]? = nil,
                           seconds: Double = ProcessDeadline.defaultSeconds) throws -> (status: Int32, output: String, error: String) {
        let out = workspace + "/\(name).out", err = workspace + "/\(name).err"
        FileManager.default.createFile(atPath: out, contents: nil)
        FileManager.default.createFile(atPath: err, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: name.hasPrefix("/") ? name : folder + "/" + name)
        process.arguments = arguments
        if let environment { process.environment = childEnvironment(environment) }
        process.currentDirectoryURL = URL(fileURLWithPath: workspace)
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        process.standardOutput = FileHandle(forWritingAtPath: out)
        process.standardError = FileHandle(forWritingAtPath: err)
        try process.spawn()
        try ProcessDeadline(process, seconds: seconds).wait(what: name)
        return (process.terminationStatus, (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
                (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }
}
