public import ArgumentParser
import CairnBLAS
import Foundation

extension AsyncParsableCommand {
    /// argument-parser's own entry point, except that a usage error is one line on standard
    /// error, `<program>: … (<program> --help)`, exiting `usage` (docs/exit-codes.md: every
    /// program says a failure in one line), and so is the program run with no command (a
    /// script's `<program> $EMPTY` must not look like success). A command that refused an
    /// argument itself has printed its line and thrown `ExitCode`: that passes through.
    ///
    /// A command that ran but could not write all of its standard output (a full disk, a closed
    /// descriptor) exits `outputFailure` with one line, rather than 0 (docs/exit-codes.md).
    public static func mainWithOneLineUsage(exitingOnUsage usage: Int32, outputFailure: Int32 = 74) async {
        BLAS.prepareEnvironment()
        let program = configuration.commandName ?? CommandLine.arguments.first ?? "?"
        do {
            var command = try parseAsRoot()
            if command is Self {
                let names = configuration.subcommands.map { $0.configuration.commandName ?? "" }.joined(separator: ", ")
                writeStandardError("\(program): no command given (\(names)); \(program) --help says more\n")
                Foundation.exit(usage)
            }
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            if let line = standardOutputFailure(program: program) {
                writeStandardError(line)
                Foundation.exit(outputFailure)
            }
        } catch {
            if !(error is ExitCode), exitCode(for: error) == .validationFailure {
                writeStandardError("\(program): \(message(for: error)) (\(program) --help)\n")
                Foundation.exit(usage)
            }
            exit(withError: error)
        }
    }
}
