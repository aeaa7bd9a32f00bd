import ArgumentParser
import CairnCore
import Foundation

struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write a self-contained repository copy of the installed version (sneakernet).",
        discussion: """
            cairnd writes DIR (absent or empty; made absolute here) as its own user. Another \
            device syncs from it with `--source file:///path/to/DIR` and verifies it like any \
            source. See protocol/socket-api.md, POST /v1/export.
            """)

    @OptionGroup var connection: ConnectionOptions
    @ParentCommand var root: CairnCommand
    @Option(help: "The folder to write (absent or empty).")
    var to: String
    @Option(help: "The channel to export (default: the daemon's own).")
    var channel: String?
    @Flag(help: "Print the daemon's JSON answer.")
    var json = false

    struct Answer: Decodable {
        var to: String
        var version: Int
        var channel: String
        var snapshot: String
        var files: Int
        var bytes: Int64
    }

    func validate() throws {
        // An unset variable (`--to "$STICK"`) must not export into the working folder.
        guard !to.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw ValidationError("--to is empty; give the folder to write (absent or empty)")
        }
        try requireText(channel, "--channel")
    }

    func run() async throws {
        let daemon = DaemonConnection(root: root.connection, local: connection, json: json)
        let target = URL(fileURLWithPath: to).standardizedFileURL.path
        var fields = ["to": target]
        if let channel { fields["channel"] = channel }
        let request = try JSONSerialization.data(withJSONObject: fields)
        // Ctrl-C ends the wait, not the export, which cairnd writes on: a stick pulled then is
        // an export cut short. Said once the export is asked for (not during the health check).
        var interrupt: (any DispatchSourceSignal)?
        defer { interrupt?.cancel() }
        let body = try daemon.callLong("POST", "/v1/export", body: Array(request), timeout: 3600) {
            interrupt = exitOnInterrupt(saying: "cairn: interrupted; the wait ended, cairnd's export into \(target) goes on (`cairn status` shows it): remove the stick only once it ends")
        }
        let answer = try daemon.decode(Answer.self, from: body)
        // cairnd may see another file system at that path than this shell: its unit's private
        // /tmp (PrivateTmp) holds an export nobody else can reach, reported as written.
        let manifest = "\(answer.to)/channels/\(answer.channel)/manifest.json"
        // Only its absence: a folder this user may not enter (cairnd's umask) says nothing.
        var info = stat()
        guard stat(manifest, &info) == 0 || errno != ENOENT else {
            daemon.fail("cairnd wrote version \(answer.version) to \(answer.to), but \(manifest) is not there for this shell: cairnd sees other files at that path (its unit's PrivateTmp or ProtectHome); export to a folder under /media, /mnt or /run/media", code: "export_not_visible")
            throw ExitCode(1)
        }
        if json { return try daemon.printJSON(body) }
        let size = ByteCountFormatter.string(fromByteCount: answer.bytes, countStyle: .file)
        print("exported version \(answer.version) of channel \(answer.channel) to \(answer.to): \(answer.files) files, \(size)"
              + " (snapshot \(answer.snapshot)); sync from it with --source \(SourceURL.forFolder(answer.to))")
    }
}
