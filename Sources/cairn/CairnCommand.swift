import ArgumentParser
import CairnCore
import CairnCommandLine
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
            2 usage error (an option given twice too); 3 cannot reach the socket; 4 no index \
            installed yet; 5 no previous version to roll back to; 65 and 128+n from eval, 66 from \
            embed and eval (no model); 74 standard output cannot be written; 77 refused to this \
            user (forbidden); 130 sync --wait or export interrupted. docs/exit-codes.md says more.
            """,
        version: "cairn " + CairnVersion.summary,
        subcommands: [QueryCommand.self, StatusCommand.self, SyncCommand.self, GetCommand.self, RollbackCommand.self,
                      ExportCommand.self, EmbedCommand.self, EvalCommand.self, MCPCommand.self]
    )

    @OptionGroup var connection: ConnectionOptions

    /// Usage errors in one line, exit 2, as docs/exit-codes.md gives for cairn.
    static func main() async { await mainWithOneLineUsage(exitingOnUsage: 2, refusingRepeatedOptions: true) }
}

/// `--socket`, accepted before or after the subcommand.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "cairnd's Unix socket (default: $CAIRN_SOCKET, else cairnd's configured socket).")
    var socket: String?

    func validate() throws {
        try requireText(socket, "--socket")
    }
}

/// A usage error (exit 2) for an argument given but empty or blank: an unset variable
/// (`--socket "$SOCK"`, `cairn get "$ID"`) is a mistake in the script, not a request to send.
func requireText(_ value: String?, _ name: String) throws {
    guard let value, value.allSatisfy(\.isWhitespace) else { return }
    throw ValidationError("\(name) is empty")
}
