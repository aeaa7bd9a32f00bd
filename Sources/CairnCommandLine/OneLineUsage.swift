public import ArgumentParser
import CairnBLAS
import Foundation

extension AsyncParsableCommand {
    /// argument-parser's own entry point, except that a usage error is one line on standard
    /// error, `<program>: … (<program> --help)`, exiting `usage` (docs/exit-codes.md: every
    /// program says a failure in one line), and so is the program run with no command (a
    /// script's `<program> $EMPTY` must not look like success), and so is a group of
    /// commands given none of them (`cairn-server root`). A command that refused an
    /// argument itself has printed its line and thrown `ExitCode`: that passes through.
    ///
    /// A command that ran but could not write all of its standard output (a full disk, a closed
    /// descriptor) exits `outputFailure` with one line, rather than 0 (docs/exit-codes.md).
    ///
    /// `refusingRepeatedOptions`: an option given twice (`-k 3 -k 50`, `--to a --to b`,
    /// `--socket` before and after the command) is a usage error, where argument-parser would
    /// keep the last without a word; but for those the command names as `RepeatableOptions`.
    public static func mainWithOneLineUsage(exitingOnUsage usage: Int32, outputFailure: Int32 = 74,
                                            refusingRepeatedOptions: Bool = false) async {
        BLAS.prepareEnvironment()
        let program = configuration.commandName ?? CommandLine.arguments.first ?? "?"
        do {
            var command = try parseAsRoot()
            if refusingRepeatedOptions, let repeated = repeatedOption(
                in: CommandLine.arguments.dropFirst(),
                allowing: (type(of: command) as? any RepeatableOptions.Type)?.repeatableOptions ?? []) {
                writeStandardError("\(program): \(repeated) is given twice; give it once (\(program) --help)\n")
                Foundation.exit(usage)
            }
            // A group of commands (the program, or `cairn-server root`) given none of them.
            let group = type(of: command).configuration
            if !group.subcommands.isEmpty, group.defaultSubcommand == nil {
                let names = group.subcommands.map { $0.configuration.commandName ?? "" }.joined(separator: ", ")
                let (given, help) = command is Self ? ("", program) : (" to \(group.commandName ?? "")", "\(program) \(group.commandName ?? "")")
                writeStandardError("\(program): no command given\(given) (\(names)); \(help) --help says more\n")
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
            // --help and --version end as a clean exit: their text is written here, so that a
            // text that did not reach standard output exits 74 as any command's does.
            if !(error is ExitCode), exitCode(for: error) == .success {
                writeStandardOutput(fullMessage(for: error) + "\n")
                if let line = standardOutputFailure(program: program) {
                    writeStandardError(line)
                    Foundation.exit(outputFailure)
                }
                Foundation.exit(0)
            }
            exit(withError: error)
        }
    }
}

/// A command whose options named here (array options: `--tag`) may be given more than once,
/// in a program that refuses any other option given twice (`refusingRepeatedOptions`).
public protocol RepeatableOptions {
    static var repeatableOptions: Set<String> { get }
}

/// The first option named twice in `arguments` (`-k`, `--to`; `--to=a` counts as `--to`), up
/// to a `--` that ends the options, other than those `allowing` names; nil when none is.
func repeatedOption(in arguments: some Sequence<String>, allowing repeatable: Set<String>) -> String? {
    var seen = Set<String>()
    for argument in arguments {
        if argument == "--" { break }
        guard argument.count > 1, argument.hasPrefix("-"), Double(argument) == nil else { continue }
        let name = String(argument.prefix { $0 != "=" })
        if !repeatable.contains(name), !seen.insert(name).inserted { return name }
    }
    return nil
}
