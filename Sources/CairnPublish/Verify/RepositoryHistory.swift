public import CairnCore
import Foundation

/// One published version as `cairn-server history` lists it.
public struct VersionSummary: Sendable {
    public var version: Int
    public var created: Timestamp
    public var expires: Timestamp
    public var chunkCount: Int
    public var snapshotSize: Int
    /// (from version, compressed bytes) of each delta to this version.
    public var deltas: [(fromVersion: Int, size: Int)]
    public var isCurrent: Bool
    /// At or below the channel's `.pruned` mark: `cairn-server prune` may have removed its blobs.
    public var isPruned = false
}

extension Repository {
    /// Every version of `channel` whose manifest verifies against `trustedKeys`, ascending, and
    /// one line for each that does not.
    public func history(channel: String, trustedKeys: [PublicKey]) -> (versions: [VersionSummary], problems: [String]) {
        let trust = (try? self.trust(keys: trustedKeys)) ?? RepositoryTrust(roots: [], keys: trustedKeys)
        let current = try? manifest(at: manifestPath(channel), trust: trust)
        var versions: [VersionSummary] = [], problems: [String] = []
        let prunedMark = self.prunedThrough(channel)
        for number in versionNumbers(channel) {
            do throws(PublishError) {
                let m = try manifest(at: versionPath(channel, number), trust: trust)
                versions.append(VersionSummary(version: m.version, created: m.created, expires: m.expires,
                                               chunkCount: m.chunkCount, snapshotSize: m.snapshot.size,
                                               deltas: m.deltas.map { (fromVersion: $0.fromVersion, size: $0.size) },
                                               isCurrent: current?.version == m.version,
                                               isPruned: m.version <= prunedMark && current?.version != m.version))
            } catch {
                problems.append(error.message)
            }
        }
        return (versions, problems)
    }
}
