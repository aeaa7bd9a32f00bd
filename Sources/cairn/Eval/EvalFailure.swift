import ArgumentParser
import CairnCommandLine
import Foundation

/// Why `cairn eval` stops: one line for standard error and the exit status.
struct EvalFailure: Error {
    /// 1 cairnd failed or did not answer; 65 bad collection files; 66 the model cannot be loaded;
    /// 74 I/O error (temporary folder, repository).
    var status: Int32
    var message: String

    init(_ status: Int32, _ message: String) {
        self.status = status
        self.message = String(message.map { $0.isNewline ? " " : $0 })
    }

    static func badInput(_ message: String) -> EvalFailure { EvalFailure(65, message) }
    static func io(_ message: String) -> EvalFailure { EvalFailure(74, message) }
    static func daemon(_ message: String) -> EvalFailure { EvalFailure(1, message) }

    /// Prints the line and returns the exit code to throw.
    func report() -> ExitCode {
        writeStandardError("cairn eval: \(message)\n")
        return ExitCode(status)
    }
}

/// A progress line on standard error (standard output carries only the results).
func progress(_ text: String) {
    writeStandardError("cairn eval: \(text)\n")
}
