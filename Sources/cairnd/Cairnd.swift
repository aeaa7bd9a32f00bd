import ArgumentParser
import CairnCore
import Foundation

@main
struct Cairnd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cairnd",
        abstract: "The Cairn device daemon: keeps a local index fresh and answers queries over a Unix socket.",
        discussion: """
            cairnd polls its sources for the channel's signed manifest, downloads a delta or a full \
            snapshot, verifies signature, hashes and state root, builds the new index beside the live \
            one and swaps it atomically. It answers hybrid retrieval over a Unix socket, online or not.

            Not built yet: syncing (issue 5) and the socket API (issue 6). Until they land cairnd \
            checks its arguments and exits with status 2.
            """
    )

    @Option(help: "Configuration file (TOML-like key = value; see client-config/).")
    var config: String?
    @Option(help: "Base URL of a repository copy (http(s)://, file://). Repeatable; tried in order.")
    var source: [String] = []
    @Option(help: "Channel to follow.")
    var channel: String?
    @Option(name: .customLong("trusted-key"), help: "Publisher public key file to pin.")
    var trustedKey: [String] = []
    @Option(name: .customLong("data-dir"), help: "Where installed versions and state live.")
    var dataDir: String?
    @Option(help: "Unix socket path for the query API.")
    var socket: String?
    @Option(name: .customLong("poll-interval"), help: "Seconds between polls.")
    var pollInterval: Double?

    func run() async throws {
        FileHandle.standardError.write(Data("cairnd: syncing and the socket API are not implemented yet (issues 5 and 6)\n".utf8))
        throw ExitCode(2)
    }
}
