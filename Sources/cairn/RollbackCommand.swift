import ArgumentParser
import Foundation

struct RollbackCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rollback",
        abstract: "Make the previous installed version current again; sync then skips the version rolled back from.",
        discussion: "Exit status 5 when the device keeps no previous version.")

    @OptionGroup var connection: ConnectionOptions
    @ParentCommand var root: CairnCommand
    @Option(help: "The channel to roll back (default: the daemon's own).")
    var channel: String?
    @Flag(help: "Print the daemon's JSON answer.")
    var json = false

    struct Answer: Decodable {
        var version: Int
        var state_root: String
        var rolled_back_from: Int
    }

    func validate() throws {
        try requireText(channel, "--channel")
    }

    func run() async throws {
        let daemon = DaemonConnection(root: root.connection, local: connection, json: json)
        // Verifying the previous version reads the whole index: allow it time.
        let request = try channel.map { try JSONSerialization.data(withJSONObject: ["channel": $0]) }.map(Array.init) ?? []
        let body = try daemon.callLong("POST", "/v1/rollback", body: request, timeout: 3600)
        if json { return try daemon.printJSON(body) }
        let answer = try daemon.decode(Answer.self, from: body)
        print("rolled back from version \(answer.rolled_back_from) to version \(answer.version) (state root \(answer.state_root));"
              + " sync installs only versions newer than \(answer.rolled_back_from)")
    }
}
