public import CairnCore

/// The decisions of one sync attempt about one verified manifest, as values: no files, no
/// network, tested alone. The `Syncer` performs what it decides.
public struct SyncPlanner: Sendable {
    /// What the device has installed, as far as the planner cares.
    public struct Installed: Sendable, Equatable {
        public var version: Int
        public var stateRoot: ContentID
        public var dimension: Int
        public var modelID: String

        public init(version: Int, stateRoot: ContentID, dimension: Int, modelID: String) {
            self.version = version
            self.stateRoot = stateRoot
            self.dimension = dimension
            self.modelID = modelID
        }
    }

    /// How to obtain the new version's index.
    public enum Path: Sendable, Equatable {
        case full(Manifest.Snapshot)
        case delta(Manifest.DeltaRef)

        /// The blob to download.
        public var blob: (sha256: ContentID, size: Int, uncompressedSize: Int) {
            switch self {
            case .full(let s): (s.sha256, s.size, s.uncompressedSize)
            case .delta(let d): (d.sha256, d.size, d.uncompressedSize)
            }
        }

        var isDelta: Bool { if case .delta = self { true } else { false } }
    }

    public enum Decision: Sendable {
        /// The manifest describes the installed version: nothing to do.
        case upToDate
        /// Newer than the installed version but not than the one a rollback held back: skipped.
        case heldBack
        /// Install `manifest` by `path` (falling back to the full snapshot if a delta fails).
        case install(Manifest, Path)
        /// Refused; the installed version keeps serving.
        case refuse(SyncError)
    }

    public var channel: String
    public var installed: Installed?
    /// The version `cairn rollback` rolled back from; only newer versions are installed.
    public var heldBack: Int?
    /// Whether an expired manifest newer than the installed version installs (flagged) or is refused.
    public var expiredUpdates: ExpiredUpdatePolicy
    /// Fast-forward recovery (protocol/root.md): the installed version was signed only by revoked
    /// keys, so neither it nor a held-back version is a floor.
    public var recovering: Bool
    /// While recovering: a manifest not above the installed version replaces it only if made
    /// since this instant (the first root under which the installed version stopped counting);
    /// an older one is a stale mirror's.
    public var recoveringSince: Timestamp?
    /// While nothing is installed: the version that was, until it could not be served
    /// (`forgotten_version`); only it (same state root) or a newer one installs.
    public var forgotten: (version: Int, stateRoot: ContentID?)?
    /// Nothing reads as installed, but the version that did still serves (its manifest stopped
    /// reading while cairnd runs): a hold still counts, as while it was installed.
    public var stillServed: Bool

    public init(channel: String, installed: Installed?, heldBack: Int? = nil, expiredUpdates: ExpiredUpdatePolicy = .install,
                recovering: Bool = false, recoveringSince: Timestamp? = nil, forgotten: (version: Int, stateRoot: ContentID?)? = nil,
                stillServed: Bool = false) {
        self.stillServed = stillServed
        self.channel = channel
        self.installed = installed
        self.heldBack = heldBack
        self.expiredUpdates = expiredUpdates
        self.recovering = recovering
        self.recoveringSince = recoveringSince
        self.forgotten = forgotten
    }

    /// Checks, in order: format, channel, version (equal: up to date; lower: rollback; not above
    /// a held-back version: skipped; while recovering only an equal version with the same state
    /// root counts, and one not above it made before `recoveringSince` is a rollback; with nothing installed,
    /// lower than a forgotten version: rollback), expiry at
    /// `now` (refused only under `expiredUpdates == .refuse`), then chooses the cheapest path: a
    /// delta from exactly the installed version and state root with the same model, when smaller
    /// than the full snapshot.
    public func decide(_ manifest: Manifest, now: Timestamp) -> Decision {
        guard manifest.formatVersion == Manifest.currentFormatVersion else {
            return .refuse(SyncError(.unsupportedFormat, "manifest format \(manifest.formatVersion) is not supported; upgrade cairnd"))
        }
        guard manifest.channel == channel else {
            return .refuse(SyncError(.channelMismatch, "the manifest is for channel \(manifest.channel), not \(channel)"))
        }
        if let installed, recovering {
            if manifest.version == installed.version, manifest.stateRoot == installed.stateRoot { return .upToDate }
            // Above the installed version it is progress, as at any time (a device offline
            // through a routine rotation, a version signed by the old and new keys before the
            // old key went). At or below it (the installed version may be a thief's, numbered
            // anything) only one made since the revocation.
            if let since = recoveringSince, manifest.created < since, manifest.version <= installed.version {
                return .refuse(SyncError(.rollback, "the manifest's version \(manifest.version) is not above the installed \(installed.version) and was made at \(manifest.created), before the rotation (\(since)) that revoked the installed version's keys; only a newer version, or one made since, replaces it"))
            }
        } else if let installed {
            if manifest.version == installed.version {
                guard manifest.stateRoot == installed.stateRoot else {
                    return .refuse(SyncError(.rollback, "the manifest reuses version \(manifest.version) with another state root; refused"))
                }
                return .upToDate
            }
            guard manifest.version > installed.version else {
                return .refuse(SyncError(.rollback, "the source serves version \(manifest.version), older than the installed \(installed.version): a copy or cache that is behind, or a replayed manifest; rollback refused"))
            }
        } else if let forgotten, !recovering {
            guard manifest.version >= forgotten.version else {
                return .refuse(SyncError(.rollback, "the manifest's version \(manifest.version) is older than version \(forgotten.version), installed until it could not be served; rollback refused"))
            }
            guard manifest.version > forgotten.version || forgotten.stateRoot == nil || manifest.stateRoot == forgotten.stateRoot else {
                return .refuse(SyncError(.rollback, "the manifest reuses version \(manifest.version) with another state root; refused"))
            }
        }
        // A hold chooses between versions: with none installed (the one rolled back to was
        // found unusable and forgotten), a held-back version beats answering nothing.
        if let heldBack, !recovering, installed != nil || stillServed, manifest.version <= heldBack {
            return .heldBack
        }
        // While recovering the version floor is gone, and the `created` bound above stands in
        // for it: expiry follows the policy, so a stick made since the rotation still serves.
        guard !(manifest.isExpired(at: now) && expiredUpdates == .refuse) else {
            return .refuse(SyncError(.expired, "manifest version \(manifest.version) expired at \(manifest.expires); refused (expired_updates = refuse), the installed version keeps serving"))
        }
        return .install(manifest, path(for: manifest))
    }

    func path(for manifest: Manifest) -> Path {
        guard let installed, installed.dimension == manifest.dimension, installed.modelID == manifest.model.id else {
            return .full(manifest.snapshot)
        }
        let usable = manifest.deltas.filter { $0.fromVersion == installed.version && $0.fromStateRoot == installed.stateRoot }
        guard let cheapest = usable.min(by: { $0.size < $1.size }), cheapest.size < manifest.snapshot.size else {
            return .full(manifest.snapshot)
        }
        return .delta(cheapest)
    }

    /// About what the rows files of `chunks` rows of `dimension` values take on disk
    /// (protocol/data-directory.md, "Rows files"): the fixed sections, and 48 bytes a row for ids
    /// and tags. A full install writes a base of every row; a delta an overlay of at most a
    /// quarter of them (past that, a new base).
    public static func rowsBytes(path: Path, chunks: Int, dimension: Int) -> Int64 {
        let rows = Int64(path.isDelta ? chunks / 4 + 1 : chunks)
        let perRow = Int64(dimension + 8 * ((dimension + 63) / 64) + 4 + 8 + 4 + 4 + 32 + 4 + 4 + 8 + 48)
        return 4096 + rows * perRow
    }

    /// Free bytes an install by `path` needs: the rest of the blob, the new index (uncompressed
    /// snapshot, or a copy of the current index plus the delta's growth), a delta's encoding
    /// inflated beside it while it is applied, the rows files, missing model files, and
    /// `margin`. Saturates instead of overflowing.
    public static func requiredBytes(path: Path, alreadyStaged: Int64, currentIndexSize: Int64, rowsBytes: Int64 = 0,
                                     missingModelBytes: Int64, margin: Int64) -> Int64 {
        let blob = path.blob
        let index: Int64 = switch path {
        case .full: Int64(blob.uncompressedSize)
        case .delta: currentIndexSize.addingReportingOverflow(Int64(blob.uncompressedSize)).partialValue
        }
        let scratch = path.isDelta ? Int64(blob.uncompressedSize) : 0
        let parts = [max(0, Int64(blob.size) - alreadyStaged), index, scratch, rowsBytes, missingModelBytes, margin]
        return parts.reduce(Int64(0)) { sum, part in
            let (value, overflow) = sum.addingReportingOverflow(part)
            return overflow ? .max : value
        }
    }
}
