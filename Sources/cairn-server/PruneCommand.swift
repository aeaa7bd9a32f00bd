import ArgumentParser
import CairnPublish
import Foundation

struct PruneCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Remove the blobs of old versions, so that a repository stops growing by a snapshot per version.",
        discussion: """
            Keeps, for each channel (or the --channel given), the blobs of its newest --keep \
            versions (by default 6, or more: back to the oldest version the current manifest \
            lists a delta from, so that a publisher's larger --keep-deltas keeps its deltas) and \
            of its current manifest: snapshot, deltas, model files; and every blob \
            that another channel's versions or a staged version name. Removes every other blob \
            under blobs/. Manifests (versions/<n>.json), roots and keys stay. Devices fetch only \
            what the current manifest names, so none is left without a way to the newest version; \
            the next publish builds its deltas from the versions kept.

            Takes the publish lock (waiting up to --lock-wait seconds) and decides from the \
            manifests read under it. Records the versions pruned in channels/<c>/.pruned before \
            removing anything: verify reports them as pruned, not missing, and still checks every \
            blob of theirs that is present.

            Prints a summary: blobs and bytes removed, the versions kept. --dry-run says the same \
            and removes nothing; it shares the lock with other readers, and reads a repository it \
            cannot write (a read-only mirror) without one. --verbose prints one line per blob.

            Exit status: 0 done; 64 bad option, no such channel or repository; 75 a publish holds \
            the lock; 74 a manifest that decides what stays does not read (nothing removed) or a \
            blob cannot be removed.
            """
    )

    @Option(help: "The repository folder.")
    var repo: String
    @Option(help: "Prune only this channel (blobs other channels name stay).")
    var channel: String?
    @Option(help: "Versions per channel whose blobs are kept (default: \(RepositoryPruner.defaultKeep), or back to the oldest version the current manifest has a delta from).")
    var keep: Int?
    @Flag(name: .customLong("dry-run"), help: "Say what would be removed; remove nothing.")
    var dryRun = false
    @Option(name: .customLong("lock-wait"), help: "Seconds to wait for a publish's lock.")
    var lockWait: Double = 5
    @Flag(help: "Print one line per blob removed.")
    var verbose = false

    func run() throws {
        followRepositoryReadability(repo)
        let pruner = RepositoryPruner(repository: Repository(root: repo), channel: channel, keep: keep,
                                      dryRun: dryRun, lockWait: lockWait)
        let report: PruneReport
        do throws(PublishError) {
            report = try pruner.prune { path, bytes in
                if verbose { print("removed \(path) (\(bytes) bytes)") }
            }
        } catch {
            throw fail(error)
        }
        if dryRun && verbose {
            for blob in report.removed { print("would remove \(blob.path) (\(blob.bytes) bytes)") }
        }
        print(report.summary)
    }
}
