public import CairnCore
import CairnIndex
import CairnStore
import Foundation

/// What `RepositoryVerifier` found.
public struct VerifyReport: Sendable {
    public var channels = 0
    public var manifests = 0
    public var blobs = 0
    public var snapshots = 0
    public var deltas = 0
    public var roots = 0
    /// Versions at or below their channel's `.pruned` mark: their missing blobs are no problem.
    public var prunedVersions = 0
    /// Deltas from a pruned version: checked but for being applied to its rows.
    public var deltasFromPruned = 0
    /// The most versions' records held at once to check deltas (bases still to be used).
    public var peakRecordVersions = 0
    /// One line per problem, naming the channel, version and file.
    public var problems: [String] = []

    public var isValid: Bool { problems.isEmpty }

    public var summary: String {
        "\(roots) root(s), \(channels) channel(s), \(manifests) manifest(s), \(blobs) blob(s), \(snapshots) snapshot(s), \(deltas) delta(s) checked"
            + (prunedVersions > 0 ? ", \(prunedVersions) version(s) pruned" : "")
            + (deltasFromPruned > 0 ? " (\(deltasFromPruned) delta(s) from them not applied)" : "") + ": "
            + (problems.isEmpty ? "all good" : "\(problems.count) problem(s)")
    }
}

/// Checks a whole repository as a device would, and more: every manifest (current and
/// `versions/*`) against the root in force when it was created (or the trusted keys, for
/// manifests older than root 1) after checking every step of the root chain, every blob against its hash and size, every snapshot
/// (inflated within its stated size, `Snapshot.verify` against the state root), and every delta
/// (inflated, decoded, applied to its base version's records, giving the target's state root).
public struct RepositoryVerifier: Sendable {
    public let repository: Repository
    public let trustedKeys: [PublicKey]
    /// A root file the repository's chain must contain byte for byte (the one devices are
    /// provisioned with): without it the chain is anchored on the repository's own root 1.
    public let trustedRoot: [UInt8]?

    /// - Parameter trustedKeys: keys for manifests created before the repository's root 1 (all
    ///   of them when it has none).
    public init(repository: Repository, trustedKeys: [PublicKey], trustedRoot: [UInt8]? = nil) {
        self.repository = repository
        self.trustedKeys = trustedKeys
        self.trustedRoot = trustedRoot
    }

    public func verify() -> VerifyReport {
        var report = VerifyReport()
        let folder: ScratchFolder
        do { folder = try ScratchFolder() } catch {
            report.problems.append(error.message)
            return report
        }
        defer { folder.remove() }
        let scratch = folder.path
        let trust: RepositoryTrust
        do { trust = try repository.trust(keys: trustedKeys) } catch {
            report.problems.append(error.message)
            return report
        }
        report.roots = trust.roots.count
        // Signatures still verify after an expiry; devices set to expired_updates = refuse then
        // take no new version, and say so only in their status.
        let now = Timestamp(clamping: Date())
        if let root = trust.current, root.isExpired(at: now) {
            report.problems.append("root \(root.version) expired at \(root.expires): devices with expired_updates = refuse take no new version; write the next with cairn-server root rotate")
        }
        if let trustedRoot {
            do {
                let pinned = try SignedRoot.verifySelfSigned(trustedRoot)
                if (try? repository.rootBytes(pinned.version)) != trustedRoot {
                    report.problems.append("\(repository.rootPath(pinned.version)) is not the trusted root \(pinned.version) given: this chain is not the one devices trust")
                }
            } catch {
                report.problems.append("the trusted root given is not acceptable: \(error.message)")
            }
        }
        // A channel folder with nothing published in it (left by a first publish that was
        // refused, or one whose version is only staged) is not a broken channel.
        let channels = repository.channels().filter { channel in
            FileSystem.exists(repository.manifestPath(channel)) || !repository.versionNumbers(channel).isEmpty
        }
        if channels.isEmpty { report.problems.append("\(repository.root): no channel with a published version in channels/") }
        var checkedBlobs: Set<ContentID> = []
        for channel in channels {
            report.channels += 1
            var checker = ChannelChecker(repository: repository, channel: channel, trust: trust, scratch: scratch)
            checker.run(&report, checkedBlobs: &checkedBlobs)
            report.peakRecordVersions = max(report.peakRecordVersions, checker.peakRecordVersions)
        }
        return report
    }
}
