public import CairnCore
import CairnStore
import Foundation

/// What `RepositoryPruner` removed, or would remove with `dryRun`.
public struct PruneReport: Sendable {
    /// Each blob removed (or that would be), with its size: `blobs/sha256/<ab>/<hex>`.
    public var removed: [(path: String, bytes: Int64)] = []
    /// Per channel pruned: the versions whose blobs are kept (`versions/<n>.json` all stay).
    public var kept: [(channel: String, versions: [Int])] = []
    /// Staged versions, whose blobs are kept.
    public var staged = 0
    public var dryRun = false

    public var removedBytes: Int64 { removed.reduce(0) { $0 + $1.bytes } }

    public var summary: String {
        let versions = kept.map { entry in
            let range = entry.versions.count > 1 ? "v\(entry.versions.first!)–v\(entry.versions.last!)" : entry.versions.map { "v\($0)" }.joined()
            return "\(entry.channel) \(range.isEmpty ? "none" : range)"
        }.joined(separator: ", ")
        let staged = staged > 0 ? " and \(self.staged) staged version(s)" : ""
        return "\(dryRun ? "would remove" : "removed") \(removed.count) blob(s), \(removedBytes) bytes; kept the blobs of \(versions)\(staged)"
            + (dryRun ? " (--dry-run: nothing removed)" : "")
    }
}

/// `cairn-server prune`: removes the blobs no version worth keeping names, so that a repository
/// stops growing by a snapshot per version (protocol/publishing.md, "Pruning").
///
/// Kept: every blob named by the newest `keep` versions of each channel pruned (and its current
/// manifest), by every version of the channels not pruned (above what an earlier prune took),
/// and by every staged manifest; a blob shared by channels stays while any of them names it.
/// Devices fetch only what the current manifest names, so a device on a pruned version takes
/// the full snapshot, or a delta the current manifest lists. Manifests, roots and keys stay.
public struct RepositoryPruner: Sendable {
    /// One more than the publisher's `--keep-deltas` default: the next publish finds every
    /// version it builds a delta from, and a device reading a manifest cached one publish back
    /// still finds its blobs.
    public static let defaultKeep = PublishConfiguration.defaultKeepDeltas + 1

    public let repository: Repository
    /// The channel to prune; nil: every channel.
    public var channel: String?
    /// Versions per channel whose blobs are kept (at least 1); nil: `defaultKeep`, or more where
    /// the current manifest lists a delta from an older version (a publisher's larger
    /// `--keep-deltas`), back to that version.
    public var keep: Int?
    /// Decide and report; remove nothing, write nothing.
    public var dryRun: Bool
    /// Seconds to wait for a publish's lock.
    public var lockWait: Double

    public init(repository: Repository, channel: String? = nil, keep: Int? = nil,
                dryRun: Bool = false, lockWait: Double = 5) {
        self.repository = repository
        self.channel = channel
        self.keep = keep
        self.dryRun = dryRun
        self.lockWait = lockWait
    }

    /// Prunes under the publish lock; `removed` is called after each blob goes.
    /// - Throws: `.invalidArgument` (`keep` below 1, no such channel, no repository), `.locked`,
    ///   `.repositoryCorrupt` (a manifest that decides what stays does not read: nothing
    ///   removed), `.io` (a blob that cannot be removed: those before it are gone).
    public func prune(removed: (String, Int64) -> Void = { _, _ in }) throws(PublishError) -> PruneReport {
        if let keep, keep < 1 { throw PublishError(.invalidArgument, "--keep must be at least 1 (the current version's blobs always stay)") }
        guard FileSystem.exists(repository.root + "/channels") else {
            throw PublishError(.invalidArgument, "\(repository.root) is not a repository (it has no channels/ folder)")
        }
        if let channel, !Manifest.isValidChannelName(channel) || repository.versionNumbers(channel).isEmpty {
            throw PublishError(.invalidArgument, "channel \(channel) has no published version in \(repository.root)")
        }
        // A dry run writes nothing, so it also reads a repository it cannot write.
        let lock = dryRun ? try PublishLock.reading(repository: repository.root, wait: lockWait)
                          : try PublishLock(repository: repository.root, wait: lockWait)
        defer { withExtendedLifetime(lock) {} }
        var report = PruneReport(dryRun: dryRun)
        var wanted: Set<ContentID> = []
        var prunedThrough: [(channel: String, version: Int)] = []
        for name in repository.channels() {
            let numbers = repository.versionNumbers(name)
            // What devices fetch: kept whatever its number.
            var current: Int?
            var oldestBase: Int?
            if FileSystem.exists(repository.manifestPath(name)) {
                let manifest = try repository.unverifiedManifest(at: repository.manifestPath(name))
                wanted.formUnion(manifest.blobIDs)
                current = manifest.version
                oldestBase = manifest.deltas.map(\.fromVersion).min()
            }
            // Versions below `from` lose their blobs; the current one never does (a killed
            // publish can leave a newer version file than manifest.json names).
            var from = repository.prunedThrough(name) + 1
            // Counted back from the current version: a version file a killed publish left above
            // it was never served, and must not take the place of one that was.
            let served = current.map { current in numbers.filter { $0 <= current } } ?? numbers
            if channel == nil || channel == name, var newest = served.suffix(keep ?? Self.defaultKeep).first {
                // The next publish with the same --keep-deltas finds every base it had.
                if keep == nil, let oldestBase { newest = min(newest, oldestBase) }
                from = min(max(from, newest), current ?? newest)
                if from > 1 {
                    prunedThrough.append((name, from - 1))
                }
                report.kept.append((name, numbers.filter { $0 >= from }))
            }
            for number in numbers where number >= from {
                wanted.formUnion(try repository.unverifiedManifest(at: repository.versionPath(name, number)).blobIDs)
            }
        }
        for path in stagedManifests() {
            wanted.formUnion(try repository.unverifiedManifest(at: path).blobIDs)
            report.staged += 1
        }
        report.removed = unwanted(keeping: wanted)
        guard !dryRun else { return report }
        for (name, version) in prunedThrough where version > repository.prunedThrough(name) {
            try repository.recordPruned(name, through: version)
        }
        for blob in report.removed {
            let path = repository.root + "/" + blob.path
            guard unlink(path) == 0 || errno == ENOENT else {
                throw PublishError(.io, "cannot remove \(path): \(String(cString: strerror(errno))); the blobs listed before it are gone, run prune again")
            }
            removed(blob.path, blob.bytes)
        }
        return report
    }

    /// Every `staged/<channel>/<n>.json`, whatever the channel (one only staged has no
    /// `channels/` folder yet).
    private func stagedManifests() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: repository.root + "/staged")) ?? []
        return names.filter(Manifest.isValidChannelName).sorted().flatMap { name in
            repository.stagedVersions(name).map { repository.stagedPath(name, $0) }
        }
    }

    /// The blobs under `blobs/sha256/` not in `wanted`, with their sizes: regular files named by
    /// 64 lowercase hex digits in the fan-out folder of their first two. Anything else there (a
    /// publish's `.tmp-*` leftover, a stranger's file) is left alone.
    private func unwanted(keeping wanted: Set<ContentID>) -> [(path: String, bytes: Int64)] {
        let manager = FileManager.default
        let fanout = repository.root + "/blobs/sha256"
        var found: [(path: String, bytes: Int64)] = []
        for folder in ((try? manager.contentsOfDirectory(atPath: fanout)) ?? []).sorted() {
            for name in ((try? manager.contentsOfDirectory(atPath: fanout + "/" + folder)) ?? []).sorted() {
                guard name.hasPrefix(folder), let id = ContentID(hex: name), id.hex == name, !wanted.contains(id) else { continue }
                var info = stat()
                guard lstat(fanout + "/" + folder + "/" + name, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
                found.append((BlobStore.relativePath(of: id), Int64(info.st_size)))
            }
        }
        return found
    }
}
