import ArgumentParser
import CairnCore
import CairnPublish
import Foundation

/// `cairn-server sign`: add signatures to a staged manifest file, on any machine.
struct SignCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign",
        abstract: "Add signatures to a staged manifest file (publish --stage).",
        discussion: """
            Needs only the file (copy REPO/staged/<channel>/<n>.json to the machine that holds \
            the key) and the key; writes the file in place. Release it with cairn-server release \
            --manifest FILE. A file inside a repository (REPO/staged/<channel>/<n>.json) is signed \
            under its publish lock, waiting up to --lock-wait seconds. Exit status: 0 signed; 65 not \
            a signed manifest file; 64 bad key file; 75 a publish or release holds the lock; 74 I/O \
            error.
            """
    )

    @Option(help: "The staged signed manifest file.")
    var manifest: String
    @Option(help: "A private key file that signs (repeatable).")
    var key: [String] = []
    @Option(name: .customLong("lock-wait"), help: "Seconds to wait for the repository's publish lock.")
    var lockWait: Double = 5

    func run() throws {
        do throws(PublishError) {
            guard !key.isEmpty else { throw PublishError(.invalidArgument, "sign needs at least one --key") }
            // A staged file's repository (through a link too) must not hold the key, as for publish.
            let repository = StagedRelease.repository(staging: URL(fileURLWithPath: manifest).resolvingSymlinksInPath().path)
            let keys = try loadPrivate(key, outside: repository)
            if let repository { followRepositoryReadability(repository) }
            let (signed, signers) = try StagedRelease.sign(file: manifest, keys: keys, lockWait: lockWait)
            print("\(manifest): version \(signed.version) of \(signed.channel), signed by \(signers.count) key(s): "
                  + signers.map(\.hex).joined(separator: ", "))
        } catch {
            throw fail(error)
        }
    }
}

/// `cairn-server release`: make a staged version current once its signatures meet the threshold.
struct ReleaseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "release",
        abstract: "Release the channel's staged version when enough keys have signed it.",
        discussion: """
            Merges the signatures of the staged file and of each --manifest copy (the same manifest, \
            signed elsewhere with cairn-server sign), checks them against the newest root's signing \
            threshold, then writes versions/<n>.json and manifest.json. No private key is needed. \
            Exit status: 0 released; 77 too few signatures (nothing released); 64 nothing staged or \
            a copy of another manifest; 75 another publish holds the lock; 74 I/O error.
            """
    )

    @Option(help: "The repository folder.")
    var repo: String
    @Option(help: "The channel.")
    var channel: String
    @Option(help: "A copy of the staged manifest signed elsewhere (repeatable).")
    var manifest: [String] = []
    @Option(name: .customLong("lock-wait"), help: "Seconds to wait for another publish's lock.")
    var lockWait: Double = 5

    func run() throws {
        followRepositoryReadability(repo)
        do throws(PublishError) {
            let released = try StagedRelease.release(repository: Repository(root: repo), channel: channel, copies: manifest, lockWait: lockWait)
            print("released version \(released.version) of \(channel)")
        } catch {
            throw fail(error)
        }
    }
}
