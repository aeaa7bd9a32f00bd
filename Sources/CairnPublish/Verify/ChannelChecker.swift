import CairnCore
import CairnIndex
import CairnStore
import Foundation

/// The checks of one channel, for `RepositoryVerifier`.
struct ChannelChecker {
    let repository: Repository
    let channel: String
    let trust: RepositoryTrust
    let scratch: String
    /// Records of versions whose snapshot verified and that a delta still to be checked starts
    /// from.
    private var records: [Int: [ChunkRecord]] = [:]
    /// The most versions' records held at once (tests: memory does not follow the history).
    private(set) var peakRecordVersions = 0
    /// Versions whose snapshot `cairn-server prune` removed: a delta from one is checked
    /// without being applied.
    private var prunedSnapshots: Set<Int> = []

    init(repository: Repository, channel: String, trust: RepositoryTrust, scratch: String) {
        self.repository = repository
        self.channel = channel
        self.trust = trust
        self.scratch = scratch
    }

    mutating func run(_ report: inout VerifyReport, checkedBlobs: inout Set<ContentID>) {
        var manifests: [Manifest] = []
        for number in repository.versionNumbers(channel) {
            let path = repository.versionPath(channel, number)
            report.manifests += 1
            do throws(PublishError) {
                let manifest = try repository.manifest(at: path, trust: trust)
                guard manifest.version == number, manifest.channel == channel else {
                    throw PublishError(.repositoryCorrupt, "\(path) holds version \(manifest.version) of channel \(manifest.channel)")
                }
                manifests.append(manifest)
            } catch {
                report.problems.append(error.message)
            }
        }
        checkCurrent(&report)
        // Versions in ascending order; each delta is checked as its target comes, against its
        // base's records, and a version's records are kept only until the last delta from it:
        // memory holds the bases still to be used (about --keep-deltas versions), not every
        // version of the channel.
        var lastUse: [Int: Int] = [:]
        for manifest in manifests {
            for delta in manifest.deltas { lastUse[delta.fromVersion] = max(lastUse[delta.fromVersion] ?? 0, manifest.version) }
        }
        // A version at or below channels/<c>/.pruned (never the current one) may lack any of
        // its blobs: `prune` removed them. Those still present are checked all the same.
        let prunedThrough = repository.prunedThrough(channel)
        let current = try? repository.unverifiedManifest(at: repository.manifestPath(channel)).version
        for manifest in manifests {
            let prefix = "\(channel) v\(manifest.version)"
            let pruned = manifest.version <= prunedThrough && manifest.version != current
            let blobs = repository.blobs
            let absent = { (id: ContentID) in pruned && !blobs.contains(id) }
            if pruned { report.prunedVersions += 1 }
            for file in manifest.model.files where !checkedBlobs.contains(file.sha256) && !absent(file.sha256) {
                checkedBlobs.insert(file.sha256)
                report.blobs += 1
                do throws(PublishError) { _ = try repository.blob(file.sha256, size: file.size, what: "\(prefix) model file \(file.name)") } catch {
                    report.problems.append(error.message)
                }
            }
            if absent(manifest.snapshot.sha256) {
                prunedSnapshots.insert(manifest.version)
            } else {
                report.blobs += 1
                report.snapshots += 1
                do throws(PublishError) {
                    try checkSnapshot(manifest, keepingRecords: lastUse[manifest.version] != nil)
                } catch {
                    report.problems.append("\(prefix): \(error.message)")
                }
            }
            for delta in manifest.deltas where !absent(delta.sha256) {
                report.blobs += 1
                report.deltas += 1
                do throws(PublishError) { try checkDelta(delta, to: manifest, report: &report) } catch {
                    report.problems.append("\(channel) v\(delta.fromVersion)→v\(manifest.version) delta: \(error.message)")
                }
            }
            peakRecordVersions = max(peakRecordVersions, records.count)
            records = records.filter { (lastUse[$0.key] ?? 0) > manifest.version }
        }
    }

    /// `manifest.json` verifies and is byte-identical to its `versions/<n>.json`.
    private func checkCurrent(_ report: inout VerifyReport) {
        let path = repository.manifestPath(channel)
        guard FileSystem.exists(path) else {
            report.problems.append("\(path) is missing")
            return
        }
        report.manifests += 1
        do throws(PublishError) {
            let manifest = try repository.manifest(at: path, trust: trust)
            // Devices check the current manifest under the newest root, whatever its date says.
            if let newest = trust.current, let bytes = try? FileSystem.read(path) {
                do { _ = try SignedManifest.decodeAndVerify(bytes, policy: newest.signingPolicy(earlier: trust.roots.dropLast())) } catch {
                    throw PublishError(.repositoryCorrupt, "\(path) would be refused by devices under root \(newest.version): \(error.code): \(error.message)")
                }
            }
            let versionPath = repository.versionPath(channel, manifest.version)
            guard let current = try? FileSystem.read(path), let archived = try? FileSystem.read(versionPath), current == archived else {
                throw PublishError(.repositoryCorrupt, "\(path) differs from \(versionPath) (or that file is missing)")
            }
            if manifest.expires <= Timestamp(clamping: Date()) {
                report.problems.append("\(channel): the current version \(manifest.version) expired at \(manifest.expires); devices report their answers expired until a newer one comes; publish a new version")
            }
        } catch {
            report.problems.append(error.message)
        }
    }

    /// - Parameter keepingRecords: whether a later delta starts from this version (its records
    ///   are then read and kept for it).
    private mutating func checkSnapshot(_ manifest: Manifest, keepingRecords: Bool) throws(PublishError) {
        let file = scratch + "/\(channel)-\(manifest.version).sqlite"
        try repository.extractSnapshot(of: manifest, to: file)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let meta: SnapshotMeta
        do { meta = try Snapshot.verify(at: file, expectedStateRoot: manifest.stateRoot) } catch {
            throw PublishError(.repositoryCorrupt, "snapshot: \(error.message)", cause: error)
        }
        guard meta.chunkCount == manifest.chunkCount, meta.dimension == manifest.dimension, meta.version == manifest.version else {
            throw PublishError(.repositoryCorrupt, "snapshot meta (version, chunk count, dimension) differs from the manifest")
        }
        if keepingRecords {
            records[manifest.version] = try SnapshotRecords.read(at: file, expectedStateRoot: manifest.stateRoot, dimension: manifest.dimension)
        }
    }

    private func checkDelta(_ ref: Manifest.DeltaRef, to manifest: Manifest, report: inout VerifyReport) throws(PublishError) {
        let compressed = try repository.blob(ref.sha256, size: ref.size, what: "delta")
        let delta: Delta
        do {
            delta = try Delta.decode(try Zlib.decompress(compressed, expectedSize: ref.uncompressedSize))
        } catch {
            throw PublishError(.repositoryCorrupt, "\(error)")
        }
        guard delta.fromVersion == ref.fromVersion, delta.toVersion == manifest.version,
              delta.fromStateRoot == ref.fromStateRoot, delta.toStateRoot == manifest.stateRoot else {
            throw PublishError(.repositoryCorrupt, "the delta's versions or state roots differ from the manifest's")
        }
        guard let base = records[ref.fromVersion] else {
            // Hash, size, decoding and state roots checked; its base's rows are gone.
            if prunedSnapshots.contains(ref.fromVersion) {
                report.deltasFromPruned += 1
                return
            }
            throw PublishError(.repositoryCorrupt, "its base version has no verified snapshot")
        }
        do { _ = try delta.apply(to: base) } catch {
            throw PublishError(.repositoryCorrupt, error.message, cause: error)
        }
    }
}
