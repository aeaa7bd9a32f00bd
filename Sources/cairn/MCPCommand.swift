import ArgumentParser
import Foundation

/// `cairn mcp`: cairnd's search as Model Context Protocol tools for an agent, over stdio.
struct MCPCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mcp",
        abstract: "Serve the device's knowledge base to an agent as MCP tools (stdio).",
        discussion: """
            An MCP server over standard input and output (JSON-RPC 2.0, one message per line, the \
            initialize handshake of revisions 2024-11-05 to 2025-11-25) with the tools search, get \
            and status, each a call to cairnd's socket. Start it from an MCP client's \
            configuration: {"command": "cairn", "args": ["mcp"]}. Logs go to standard error.
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @ParentCommand var root: CairnCommand
    @Option(help: "Seconds to wait for cairnd before a tool call fails.")
    var timeout: Double = 30

    func validate() throws {
        guard timeout.isFinite, timeout > 0, timeout <= 86_400 else {
            throw ValidationError("--timeout must be a number of seconds above 0 and at most 86400")
        }
    }

    func run() throws {
        let daemon = DaemonConnection(root: root.connection, local: connection)
        MCPServer(tools: MCPTools(socketPath: daemon.socketPath, timeout: timeout, note: daemon.note)).run()
    }
}
