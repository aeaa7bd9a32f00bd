import ArgumentParser
import CairnCommandLine
import CairnCore
import Foundation

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
    static func main() async {
        // A repository is written to be served, often by a web server of another user: a umask
        // that would hide it (077, root's cron) made every new blob 0600 and folder 0700, and
        // nginx answered 403. Read and search bits are not masked; write bits stay as set, and
        // a private key is written 0600 whatever the umask.
        umask(umask(0) & ~0o055)
        await mainWithOneLineUsage(exitingOnUsage: 64)
    }
}
