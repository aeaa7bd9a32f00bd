import ArgumentParser
import CairnCommandLine
import CairnCore

@main
struct CairnServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cairn-server",
        abstract: "Publishes a knowledge base as signed, versioned snapshots and serves the repository.",
        discussion: """
            A repository is a folder of static, content-addressed files: every file except a \
            channel's current manifest is immutable and named by its SHA-256, so any web server, \
            object store or CDN can carry it.
            """,
        version: "cairn-server " + CairnVersion.summary,
        subcommands: [KeygenCommand.self, RootCommand.self, PublishCommand.self, SignCommand.self, ReleaseCommand.self,
                      VerifyCommand.self, HistoryCommand.self, PruneCommand.self, ServeCommand.self]
    )

    /// Usage errors in one line, exit 64 (EX_USAGE), as every failure of cairn-server.
    static func main() async { await mainWithOneLineUsage(exitingOnUsage: 64) }
}
