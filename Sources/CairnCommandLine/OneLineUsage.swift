public import ArgumentParser
import CairnBLAS
import Foundation

extension AsyncParsableCommand {
    /// argument-parser's own entry point, except that a usage error is one line on standard
    /// error, `<program>: … (<program> --help)`, exiting `usage` (docs/exit-codes.md: every
    /// program says a failure in one line), and so is the program run with no command (a
    /// script's `<program> $EMPTY` must not look like success). A command that refused an
    /// argument itself has printed its line and thrown `ExitCode`: that passes through.
    public static func mainWithOneLineUsage(exitingOnUsage usage: Int32) async {
        BLAS.prepareEnvironment()
        let program = configuration.commandName ?? CommandLine.arguments.first ?? "?"
        do {
            var command = try parseAsRoot()
            if command is Self {
                let names = configuration.subcommands.map { $0.configuration.commandName ?? "" }.joined(separator: ", ")
                FileHandle.standardError.write(Data("\(program): no command given (\(names)); \(program) --help says more\n".utf8))
                Foundation.exit(usage)
            }
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            if !(error is ExitCode), exitCode(for: error) == .validationFailure {
                FileHandle.standardError.write(Data("\(program): \(message(for: error)) (\(program) --help)\n".utf8))
                Foundation.exit(usage)
            }
            exit(withError: error)
        }
    }
}
