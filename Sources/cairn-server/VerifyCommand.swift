import ArgumentParser
import CairnPublish
import CairnStore
import Foundation

struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every signature, hash, snapshot and delta of a repository.",
        discussion: """
            Checks the root of trust when the repository has one (root/1.root.json signed by its \
            own root keys, each later root by a threshold of the one before and of its own), then, \
            for every channel: each manifest (manifest.json and versions/*.json) against the root \
            in force when it was created (the newest root created before it; manifests older than \
            root 1: the trusted keys), and that manifest.json equals its versions/<n>.json; each blob's SHA-256 \
            and size; each snapshot (inflated within the manifest's uncompressed size, then SQLite, \
            full-text index, per-chunk hashes and state root); each delta (inflated, decoded, applied \
            to its base version's records, giving the target's state root). A version that \
            cairn-server prune pruned (at or below channels/<c>/.pruned, never the current one) \
            may lack its blobs: it is counted as pruned in the summary, and its blobs still present \
            are checked; a delta from it is checked but not applied.

            Keys: the --trusted-key files, else the keys the publisher stored under REPO/keys/ (which \
            checks integrity but not who published). Prints one line per problem and a summary; \
            exit status 0 only if everything checks out, else 1.
            """
    )

    @Argument(help: "The repository folder.")
    var repo: String
    @Option(name: .customLong("trusted-key"), help: "A publisher public key file (repeatable): for manifests older than root 1.")
    var trustedKey: [String] = []
    @Option(name: .customLong("trusted-root"), help: "The root file devices are provisioned with: the repository's chain must hold it byte for byte.")
    var trustedRoot: String?

    func run() throws {
        let repository = Repository(root: repo)
        let keys = try trustedKeys(files: trustedKey, repository: repository)
        var pinned: [UInt8]?
        if let trustedRoot {
            do { pinned = try FileSystem.read(trustedRoot) } catch {
                printError("cannot read trusted root \(trustedRoot): \(error.reason)")
                throw ExitCode(64)
            }
        }
        let report = RepositoryVerifier(repository: repository, trustedKeys: keys, trustedRoot: pinned).verify()
        for problem in report.problems { print("problem: \(problem)") }
        print(report.summary)
        if !report.isValid { throw ExitCode(1) }
    }
}
