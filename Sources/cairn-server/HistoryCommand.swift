import ArgumentParser
import CairnCore
import CairnPublish
import Foundation

struct HistoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "List a channel's published versions.",
        discussion: """
            One line per version in channels/C/versions/: version, created date, chunk count, \
            compressed snapshot size and the deltas to it (from-version:bytes). The current version \
            is marked with *, a version whose blobs cairn-server prune removed with "(pruned)" at the \
            end. Each manifest is checked under the root of REPO/root/ in force when it was made; one \
            older than root 1 (or in a repository without roots) against the --trusted-key files, \
            else the keys under REPO/keys/. One that fails is reported and the exit status is 1.
            """,
        aliases: ["list"]
    )

    @Option(help: "The repository folder.")
    var repo: String
    @Option(help: "The channel.")
    var channel: String
    @Option(name: .customLong("trusted-key"), help: "A publisher public key file (repeatable).")
    var trustedKey: [String] = []

    func run() throws {
        let repository = Repository(root: repo)
        let keys = try trustedKeys(files: trustedKey, repository: repository, announce: { printError($0) })
        let (versions, problems) = repository.history(channel: channel, trustedKeys: keys)
        print("  version  created               chunks   snapshot B  deltas (from:B)")
        for v in versions {
            let deltas = v.deltas.isEmpty ? "-" : v.deltas.map { "\($0.fromVersion):\($0.size)" }.joined(separator: " ")
            print("\(v.isCurrent ? "*" : " ") \(pad(v.version, 7))  \(v.created.rfc3339)  \(pad(v.chunkCount, 7))  \(pad(v.snapshotSize, 11))  \(deltas)\(v.isPruned ? "  (pruned)" : "")")
        }
        for problem in problems { printError(problem) }
        if versions.isEmpty && problems.isEmpty { printError("channel \(channel) has no versions in \(repo)") }
        if !problems.isEmpty || versions.isEmpty { throw ExitCode(1) }
    }

    private func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: " ", count: max(0, width - text.count)) + text
    }
}
