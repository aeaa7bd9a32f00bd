import ArgumentParser
import Foundation

@main
struct CairnCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cairn",
        abstract: "The Cairn command line: query a device's knowledge base, check the model.",
        discussion: """
            query, status, sync, get, rollback and export talk to cairnd over its Unix socket: --socket, else \
            $CAIRN_SOCKET, else `socket` in /etc/cairn/cairnd.conf when it exists, else \
            /run/cairn/cairnd.sock. The API is described in protocol/socket-api.md.

            Exit status: 0 ok; 1 the daemon answered with an error (its message is printed); \
            2 usage error; 3 cannot reach the socket; 4 no index installed yet; 5 no previous \
            version to roll back to.
            """,
        subcommands: [QueryCommand.self, StatusCommand.self, SyncCommand.self, GetCommand.self, RollbackCommand.self,
                      ExportCommand.self, EmbedCommand.self, EvalCommand.self, MCPCommand.self]
    )

    @OptionGroup var connection: ConnectionOptions

    /// argument-parser's own entry point, except that a usage error is one line on standard
    /// error, `cairn: …`, with exit status 2 (not 64), as docs/exit-codes.md promises, and so is
    /// `cairn` with no command (a script's `cairn $EMPTY` must not look like success).
    static func main() async {
        do {
            var command = try parseAsRoot()
            if command is CairnCommand {
                let names = configuration.subcommands.map { $0.configuration.commandName ?? "" }.joined(separator: ", ")
                FileHandle.standardError.write(Data("cairn: no command given (\(names)); cairn --help says more\n".utf8))
                Foundation.exit(2)
            }
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            if exitCode(for: error) == .validationFailure {
                FileHandle.standardError.write(Data("cairn: \(message(for: error)) (cairn --help)\n".utf8))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}

/// `--socket`, accepted before or after the subcommand.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "cairnd's Unix socket (default: $CAIRN_SOCKET, else cairnd's configured socket).")
    var socket: String?
}
