import ArgumentParser
import CairnClient
import CairnCore
import Foundation

struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get", abstract: "Print one chunk of the installed version.")

    @OptionGroup var connection: ConnectionOptions
    @ParentCommand var root: CairnCommand
    @Argument(help: "The chunk id.")
    var id: String
    @Option(help: "The channel to read from (a search result's), when cairnd follows several.")
    var channel: String?
    @Option(name: .customLong("version"), help: "The version a search answered from: exit 1 (version_changed) if another version serves now.")
    var version: Int?
    @Flag(help: "Print the daemon's JSON answer.")
    var json = false

    func validate() throws {
        try requireText(id, "the chunk id")
        try requireText(channel, "--channel")
        if let version, version < 1 { throw ValidationError("--version must be a version number (1 or more)") }
    }

    func run() async throws {
        let daemon = DaemonConnection(root: root.connection, local: connection, json: json)
        let body = try daemon.call("GET", ChunkAnswer.path(for: id, channel: channel, version: version))
        // Printed as it came unless pinned: then read first, as a cairnd from before 2026-12-06
        // ignores ?version= and answers from the version it serves.
        if json, version == nil { return try daemon.printJSON(body) }
        let answer = try daemon.decode(ChunkAnswer.self, from: body)
        if let version, answer.version != version {
            let message = ChunkAnswer.versionChanged(pinned: version, serving: answer.version)
            daemon.fail("\(message) (version_changed)", code: "version_changed", message: message)
            throw ExitCode(1)
        }
        if json { return try daemon.printJSON(body) }
        let chunk = answer.chunk
        print(chunk.title)
        print("id \(chunk.id) · scenario \(chunk.scenario ?? "none") · tags \(chunk.tags.joined(separator: ", "))"
              + (chunk.source.map { " · source \($0)" } ?? "") + " · version \(answer.version)"
              + (answer.channel.map { " · channel \($0)" } ?? ""))
        print("")
        print(chunk.content)
    }
}
