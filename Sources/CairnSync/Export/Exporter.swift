public import CairnCore
import CairnIndex
import CairnStore
import CairnThreads
import Foundation
import Logging
import Synchronization

/// Writes a repository (protocol/repository.md) holding exactly the installed version, for
/// another device to sync from with a `file://` source: blobs first, then the root chain the
/// device accepted (`root/<n>.root.json`), all read back from the disk, then
/// `channels/<c>/versions/<n>.json` and `manifest.json`, each checked against the signed
/// manifest before it is written.
struct Exporter {
    let directory: DataDirectory
    let trustedKeys: [PublicKey]
    /// The pinned root, whose chain the export carries; nil for a device pinned to keys.
    let pinnedRoot: [UInt8]?
    /// The room an install keeps free on the data directory's disk (`free_space_margin`); a
    /// snapshot rebuilt for the export keeps it too.
    let freeSpaceMargin: Int64
    let logger: Logger
    /// Asked between the export's steps and during its copies: true ends it (`cancelled`), its
    /// folder removed.
    var stopping: @Sendable () -> Bool = { Stopping.isRequested }

    /// The folders an export is writing into now, in this process: another channel's export
    /// into the same folder would find it empty too, and one's clean-up would remove the
    /// other's files. Between processes, the marker's lock (`ExportMarker`) keeps them apart.
    static let writing = Mutex<Set<String>>([])

    /// Written into the target first and removed last: a folder holding it is an export cut
    /// short (a stick pulled, a power cut, SIGKILL), which the next export may replace.
    static let unfinishedMarker = ".cairn-export-unfinished"

    /// What file systems and desktops make at a stick's root, no one's files: `mkfs.ext4`'s
    /// `lost+found`, the folders Windows makes on any FAT or exFAT stick it mounts, macOS's
    /// (and their AppleDouble `._` files on FAT), and a Linux desktop's trash (`.Trash-1000`, or
    /// the shared `.Trash`, where a file manager puts an old export deleted from the stick). Not
    /// "not empty", and never removed.
    static let systemEntries: Set<String> = ["lost+found", "System Volume Information", "$RECYCLE.BIN",
                                             ".Spotlight-V100", ".fseventsd", ".Trashes", ".DS_Store",
                                             ".TemporaryItems", "._.Trashes", "._.DS_Store", ".Trash"]

    static func isSystemEntry(_ name: String) -> Bool {
        systemEntries.contains(name) || name.hasPrefix(".Trash-")
    }

    /// Whether an entry at a target's top level is one an export writes: its folders, the
    /// marker, and an atomic write's temporary file (`.tmp-<uuid>`, the marker's).
    static func isExportEntry(_ name: String) -> Bool {
        ["blobs", "channels", "root", "keys", unfinishedMarker].contains(name) || name.hasPrefix(".tmp-")
    }

    /// When `target` holds a finished export (a manifest, read without checking its signature:
    /// said, not trusted), what it holds beside what this device has: an export run again, or
    /// a stick from a newer device, whose removal would put an older version in its place.
    func heldExport(in target: String, installed: InstalledVersion) -> String {
        let own = installed.manifest.channel
        // A few channels at most, each manifest no larger than a device reads, and never a FIFO
        // or a link (a stick's files are anyone's): the export holds the channel's syncs.
        let channels = ([own] + directory.entries(target + "/channels").filter { $0 != own }.sorted()).prefix(8)
        for channel in channels {
            guard let bytes = FileSystem.readRegularFile("\(target)/channels/\(channel)/manifest.json", atMost: CanonicalJSON.maxInputBytes),
                  let envelope = try? SignedManifest.decodeEnvelope(bytes),
                  let held = try? Manifest(json: envelope.content) else { continue }
            let mine = installed.version
            let relation = held.channel != own ? "another channel than this device's \(own)"
                : held.version == mine ? "the version this device has"
                : held.version > mine ? "newer than this device's \(mine): removing it would put an older version in its place"
                : "older than this device's \(mine)"
            return " (it holds an export of channel \(held.channel), version \(held.version), \(relation))"
        }
        return ""
    }

    /// Claims `target` for one export (false when another holds it); `release` gives it back.
    static func claim(_ target: String) -> Bool { writing.withLock { $0.insert(Self.key(target)).inserted } }
    static func release(_ target: String) { _ = writing.withLock { $0.remove(Self.key(target)) } }
    private static func key(_ target: String) -> String { (target as NSString).standardizingPath }

    func export(to target: String) throws(SyncError) -> ExportResult {
        guard target.hasPrefix("/"), target.count > 1 else {
            throw SyncError(.badPath, "export needs an absolute folder path")
        }
        guard Self.claim(target) else {
            throw SyncError(.exportTargetNotEmpty, "another export is writing into \(target) now; export into a new or empty folder")
        }
        defer { Self.release(target) }
        guard let installed = directory.installed() else {
            throw SyncError(.notInstalled, "no version is installed; nothing to export")
        }
        // Before anything else: a folder cairnd may not enter reads as absent below (a stick a
        // desktop mounted for its user, under /run/media/USER, 0750), and would pass for one
        // that nothing is mounted at.
        if let problem = ExportRoom.accessProblem(target: target) { throw problem }
        var info = stat()
        let existed = stat(target, &info) == 0
        guard !existed || info.st_mode & S_IFMT == S_IFDIR else {
            throw SyncError(.badPath, "\(target) is not a folder; export into a new or empty folder")
        }
        // No stick mounted there, or a read-only one: said before an export cut short there is
        // taken over (its marker opened for writing) or anything else is tried.
        let fileSystem = ExportRoom.fileSystem(holding: target)
        if let problem = ExportRoom.unmountedMediaProblem(target: target, real: fileSystem.real, mountPoint: fileSystem.mountPoint,
                                                          mountRoot: fileSystem.mountRoot)
               ?? ExportRoom.readOnlyProblem(target: target, folder: fileSystem.real, mountPoint: fileSystem.mountPoint,
                                             readOnly: fileSystem.readOnly, readOnlyView: fileSystem.readOnlyView) {
            throw problem
        }
        // An ext4 stick's root holds `lost+found` from its making (and the FAT refusal below
        // recommends ext4), a stick Windows or macOS mounted their own folders: no one's
        // files, so not "not empty", and never removed.
        var marker: ExportMarker?
        if existed, !ownEntries(target).isEmpty {
            guard FileSystem.exists(target + "/" + Self.unfinishedMarker) else {
                throw SyncError(.exportTargetNotEmpty, "\(target) is not empty\(heldExport(in: target, installed: installed)); export into a new or empty folder")
            }
            // An export cut short left it: what it wrote goes, the marker last. Anything else
            // is someone's (documents copied onto the stick since): refused, never removed.
            let others = ownEntries(target).filter { !Self.isExportEntry($0) }
            guard others.isEmpty else {
                throw SyncError(.exportTargetNotEmpty, "\(target) holds an export cut short and other files (\(others.sorted().prefix(3).joined(separator: ", "))); move them, or export into a new or empty folder")
            }
            // Unless an export in another process is writing it now, which holds the marker.
            marker = try ExportMarker.takeOver(in: target)
            logger.notice("removing what an export cut short left in \(target)", metadata: ["cairn.sync.path": "\(target)"])
            removeExport(from: target, keepingMarker: true)
            guard ownEntries(target) == [Self.unfinishedMarker] else {
                throw SyncError(.exportTargetNotEmpty, "\(target) holds an export cut short that cannot be removed; remove it by hand, or export into a new or empty folder")
            }
        }
        // Before a byte is written (or a snapshot rebuilt for minutes): a stick too small, or one
        // whose file system cannot hold the snapshot blob, is refused at once.
        let manifest = installed.manifest
        let files = [Int64(manifest.snapshot.size)] + manifest.model.files.map { Int64($0.size) }
        // The room asked now: an export cut short, removed above, gave some back.
        if let free = try? FileSystem.availableBytes(at: fileSystem.real),
           let problem = ExportRoom.problem(target: target, fileSystem: (fileSystem.type, free), files: files) {
            throw problem
        }
        try checkTrust(installed)
        let held: ExportMarker
        if let marker { held = marker } else { held = try newMarker(in: target, existed: existed) }
        do {
            return try write(installed, to: target, marker: held)
        } catch {
            // Leave nothing half-written behind: a partial repository must not look like a source.
            if existed {
                removeExport(from: target, keepingMarker: false)
            } else {
                try? FileManager.default.removeItem(atPath: target)
            }
            withExtendedLifetime(held) {}  // the marker's lock held until its files are gone
            throw error
        }
    }

    /// The folder, made if need be, and a new marker in it, checked empty again under the
    /// marker: an export in another process may have written it whole (and removed its marker)
    /// since it was found empty.
    private func newMarker(in target: String, existed: Bool) throws(SyncError) -> ExportMarker {
        do { try FileSystem.makeDirectory(target) } catch {
            throw SyncError.writing("cannot write into \(target): \(error.message)", error)
        }
        let marker: ExportMarker
        do throws(SyncError) { marker = try ExportMarker.create(in: target) } catch {
            if !existed { rmdir(target) }  // only while empty: another export's stays
            throw error
        }
        guard ownEntries(target) == [Self.unfinishedMarker] else {
            try? marker.remove()
            throw SyncError(.exportTargetNotEmpty, "\(target) is not empty; export into a new or empty folder")
        }
        return marker
    }

    private func write(_ installed: InstalledVersion, to target: String, marker: ExportMarker) throws(SyncError) -> ExportResult {
        let manifest = installed.manifest
        let repository = BlobStore(root: target)
        var bytes: Int64 = 0
        /// Every file written and its SHA-256, for the read-back (and the answer's count).
        var written: [(path: String, id: ContentID)] = []
        /// Copies the file at `path` (`id`, `size` bytes) in, a megabyte at a time.
        func copy(_ path: String, as id: ContentID, size: Int, what: String) throws(SyncError) {
            do { try repository.put(file: path, id: id, stopping: stopping) } catch {
                try checkStopping()
                throw SyncError.writing("cannot write \(what) into \(target): \(error.message)", error)
            }
            written.append((repository.path(of: id), id))
            bytes += Int64(size)
        }
        func writeSmall(_ content: [UInt8], to path: String) throws(StoreError) {
            try FileSystem.writeAtomically(content, to: path)
            written.append((path, ContentID(hashing: content)))
        }

        let (snapshot, origin) = try snapshotBlob(installed)
        defer { if origin == .rebuilt { unlink(snapshot) } }
        try checkStopping()
        try copy(snapshot, as: manifest.snapshot.sha256, size: manifest.snapshot.size, what: "the snapshot blob")
        if !manifest.model.files.isEmpty {
            guard let model = installed.modelDirectory else {
                throw SyncError(.io, "version \(installed.version)'s model files are not on this device; nothing exported")
            }
            // Hashed and copied a megabyte at a time, as the snapshot blob is: read whole, a
            // model's tens or hundreds of megabytes would sit on the heap of a cairnd serving
            // on a small device, which maps its model to keep them off.
            for file in manifest.model.files {
                try checkStopping()
                let path = model + "/" + file.name
                let held: ContentID
                do { held = try FileSystem.sha256(of: path, stopping: stopping).id } catch {
                    try checkStopping()
                    throw SyncError(.io, error.message, cause: error)
                }
                guard held == file.sha256 else {
                    throw SyncError(.hashMismatch, "model file \(file.name) of version \(installed.version) does not match its signed SHA-256; not exported")
                }
                try copy(path, as: file.sha256, size: file.size, what: "model file \(file.name)")
            }
        }
        let signed = try read(installed.manifestPath)
        let channel = "\(target)/channels/\(manifest.channel)"
        do {
            try FileSystem.makeDirectory(channel + "/versions")
            // The root chain the device accepted, so a device pinned to an older root catches up
            // from this folder alone (protocol/root.md); before the manifests that need it.
            for root in pinnedRoot.map(directory.persistedRoots) ?? [] {
                try FileSystem.makeDirectory(target + "/root")
                try writeSmall(root.bytes, to: target + "/root/" + DataDirectoryLayout.rootFile(root.version))
            }
            for key in trustedKeys where (try? SignedManifest.decodeAndVerify(signed, trustedKeys: [key])) != nil {
                try FileSystem.makeDirectory(target + "/keys")
                try writeSmall(Array(key.fileText.utf8), to: "\(target)/keys/\(key.keyID.hex).pub")
            }
        } catch {
            throw SyncError.writing("cannot write the root chain into \(target): \(error.message)", error)
        }
        // Everything the manifests name is read back before they are written: until then the
        // folder holds no manifest, so no device syncs from an export that a kill or a pulled
        // stick cut during the read-back (minutes for a large blob on a slow stick).
        try ExportReadBack.check(written, in: target, stopping: checkStopping)
        let named = written.count
        do {
            try writeSmall(signed, to: "\(channel)/versions/\(manifest.version).json")
            try writeSmall(signed, to: "\(channel)/manifest.json")
            try FileSystem.syncDirectory(target)
        } catch {
            throw SyncError.writing("cannot write the manifest into \(target): \(error.message)", error)
        }
        bytes += Int64(signed.count) * 2
        try ExportReadBack.check(Array(written[named...]), in: target, stopping: checkStopping)
        try marker.remove()
        do { try FileSystem.syncDirectory(target) } catch {
            throw SyncError.writing("cannot finish the export in \(target): \(error.message)", error)
        }
        logger.info("exported and read back", metadata: ["cairn.sync.version": "\(installed.version)", "cairn.sync.path": "\(target)",
                                                         "cairn.sync.snapshot": "\(origin.rawValue)", "cairn.sync.files": "\(written.count)"])
        return ExportResult(to: target, channel: manifest.channel, version: installed.version,
                            stateRoot: installed.stateRoot.hex, snapshot: origin, files: written.count, bytes: bytes)
    }

    /// A file holding the signed snapshot bytes (its SHA-256 checked): the blob kept at install,
    /// else one rebuilt from the index into the staging folder (the caller removes it). Both are
    /// passes over files: a version of any size is exported in flat memory.
    private func snapshotBlob(_ installed: InstalledVersion) throws(SyncError) -> (String, ExportResult.SnapshotOrigin) {
        let signed = installed.manifest.snapshot
        if FileSystem.exists(installed.snapshotBlobPath) {
            let kept = try? FileSystem.sha256(of: installed.snapshotBlobPath, stopping: stopping)
            try checkStopping()
            if let kept, kept.id == signed.sha256, kept.size == signed.size {
                return (installed.snapshotBlobPath, .kept)
            }
            logger.warning("the kept snapshot blob does not match its hash; rebuilding it",
                           metadata: ["cairn.sync.version": "\(installed.version)"])
        }
        let scratch = "\(directory.stagingPath)/export-\(installed.version).sqlite", blob = scratch + ".blob"
        unlink(scratch)
        unlink(blob)
        defer { unlink(scratch) }
        // The rebuilt file and its blob are written beside the live version, on the device's own
        // disk: refused at once when they cannot fit, rather than filling it (which would also
        // fail the next install).
        let needed = Int64(signed.uncompressedSize) + Int64(signed.size) + freeSpaceMargin
        if let free = try? FileSystem.availableBytes(at: directory.path), free < needed {
            throw SyncError(.diskFull, "rebuilding version \(installed.version)'s snapshot for the export needs \(needed) bytes on the data directory's disk and \(free) are free; nothing was exported")
        }
        let compressed: Zlib.Compressed
        do {
            try checkStopping()
            try SnapshotWriter.rebuild(from: installed.indexPath, to: scratch, stopping: stopping)
            try checkStopping()
            compressed = try Zlib.compressFile(scratch, to: blob, level: 9, stopping: stopping)
        } catch let error as SyncError {
            unlink(blob)
            throw error
        } catch {
            unlink(blob)
            // Stopped (SIGTERM) inside the rebuild or the compression: said as such.
            try checkStopping()
            let full = (error as? IndexError)?.code == .diskFull || (error as? StoreError)?.code == .diskFull
            throw SyncError(full ? .diskFull : .io, "cannot rebuild the snapshot of version \(installed.version): \(error)")
        }
        guard compressed.size == signed.size, compressed.sha256 == signed.sha256 else {
            unlink(blob)
            throw SyncError(.exportUnreproducible, """
                version \(installed.version) was installed by a delta and its snapshot rebuilt here differs from the signed one \
                (the publisher's SQLite or zlib differs from this device's); nothing was exported: copy the repository \
                itself, or export from a device that installed version \(installed.version) from its full snapshot
                """)
        }
        return (blob, .rebuilt)
    }

    /// Refuses (before anything is written) a version that the trust the export carries does
    /// not accept: a device in recovery still serves one signed only by a key its newest root
    /// revoked, and a device pinned to keys one whose key was taken out of `trusted_key`. No
    /// device would install it from the stick.
    func checkTrust(_ installed: InstalledVersion) throws(SyncError) {
        let signed = try read(installed.manifestPath)
        let envelope: SignedEnvelope
        do { envelope = try SignedManifest.decodeEnvelope(signed) } catch {
            throw SyncError(.exportUntrusted, "version \(installed.version)'s manifest does not read: \(error.message); nothing was exported")
        }
        if let pinnedRoot {
            let chain = try directory.trustChain(pinned: pinnedRoot)
            do { try chain.policy.check(envelope, domain: SignedManifest.domain, what: "manifest") } catch {
                throw SyncError(.exportUntrusted, "version \(installed.version) does not meet root \(chain.current.version), which the export carries (\(error.message)); no device would install it: sync this device first; nothing was exported")
            }
        } else if !trustedKeys.isEmpty, envelope.validSigners(among: trustedKeys, domain: SignedManifest.domain).isEmpty {
            throw SyncError(.exportUntrusted, "version \(installed.version) is signed by no key in trusted_key; no device pinned to them would install it; nothing was exported")
        }
    }

    /// The entries of `target` but system ones (`isSystemEntry`), which are no one's files.
    private func ownEntries(_ target: String) -> [String] {
        directory.entries(target).filter { !Self.isSystemEntry($0) }
    }

    /// Removes what an export writes from `target` (not the folder, nor anything else in it),
    /// the marker last unless `keepingMarker`: a clean-up cut short leaves a folder the next
    /// export still knows for one cut short.
    private func removeExport(from target: String, keepingMarker: Bool) {
        for entry in directory.entries(target) where Self.isExportEntry(entry) && entry != Self.unfinishedMarker {
            try? FileManager.default.removeItem(atPath: target + "/" + entry)
        }
        if !keepingMarker, ownEntries(target).allSatisfy({ $0 == Self.unfinishedMarker }) {
            unlink(target + "/" + Self.unfinishedMarker)
        }
    }

    /// Throws `cancelled` when the process is stopping.
    func checkStopping() throws(SyncError) {
        if stopping() { throw SyncError(.cancelled, "cairnd is stopping: the export was stopped and what it wrote removed; export again") }
    }

    private func read(_ path: String) throws(SyncError) -> [UInt8] {
        do { return try FileSystem.read(path) } catch { throw SyncError(.io, error.message, cause: error) }
    }
}

/// What an export does once everything is written: reads every file back from the disk (its
/// pages dropped from the cache first) and compares its SHA-256 with what was written. A stick
/// that is failing, or fake — reporting more room than it has and silently dropping or wrapping
/// writes, a common cheap stick — is found here, while the operator still has the device at
/// hand, rather than weeks later by the device it was carried to.
public enum ExportReadBack {
    /// Throws `hash_mismatch` naming the first file (relative to `target`) whose bytes differ,
    /// `io` for one that cannot be read back.
    public static func check(_ files: [(path: String, id: ContentID)], in target: String,
                             stopping: () throws(SyncError) -> Void = {}) throws(SyncError) {
        for file in files {
            try stopping()
            let name = file.path.hasPrefix(target + "/") ? String(file.path.dropFirst(target.count + 1)) : file.path
            let back: ContentID
            // Asked within each file too: a gigabyte read back from a slow stick takes minutes.
            do { back = try FileSystem.sha256(of: file.path, fromDisk: true, stopping: { (try? stopping()) == nil }).id } catch {
                try stopping()
                throw SyncError(.io, "cannot read \(name) back from \(target) (\(error.message)); the disk may be failing; nothing was left on it", cause: error)
            }
            guard back == file.id else {
                throw SyncError(.hashMismatch, "\(name) read back from \(target) differs from what was written: the disk is failing, or fake (smaller than it reports); nothing was left on it")
            }
        }
    }
}

/// Whether a target's file system can take an export, judged before anything is written.
public enum ExportRoom {
    /// File system types (as /proc/self/mountinfo names them) that hold no file of 4 GiB or more.
    static let fatTypes: Set<String> = ["vfat", "msdos", "fat"]
    static let fatLargestFile: Int64 = (1 << 32) - 1
    /// What the small files take beside the blobs: two copies of the manifest, root files, keys,
    /// folders (a few KiB each, in whole blocks).
    public static let smallFiles: Int64 = 256 << 10

    /// Where removable media are mounted (udisks, systemd, by hand): a target below one of them
    /// that is not on a mount below it is on the device's own disk.
    static let removableMediaRoots = ["/media", "/mnt", "/run/media"]

    /// The file system of `path`, or of its nearest existing parent: its type (from
    /// /proc/self/mountinfo; "" when unknown), its mount point and `boundRoot`, whether it is
    /// read-only, and the nearest existing folder with symbolic links resolved (`real`: ask
    /// `FileSystem.availableBytes(at:)` its room).
    public static func fileSystem(holding path: String)
        -> (type: String, mountPoint: String, mountRoot: String, real: String, readOnly: Bool, readOnlyView: Bool) {
        var probe = path
        while !FileSystem.exists(probe), probe != "/" {
            probe = (probe as NSString).deletingLastPathComponent
            if probe.isEmpty { probe = "/" }
        }
        let real = URL(fileURLWithPath: probe).resolvingSymlinksInPath().path
        let mounts = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
        let mount = self.mount(of: real, mountinfo: mounts)
        return (mount.type, mount.point, boundRoot(of: mount, mountinfo: mounts), real, mount.readOnly, mount.readOnlyView)
    }

    /// The folder bound at the mount holding `path` when it is a folder of the file system
    /// beneath that mount point, as systemd's `ReadWritePaths=` binds /media (on "/") or
    /// /run/media (on the /run tmpfs) onto itself; "/" for a whole file system, or a folder of
    /// another (a stick's btrfs subvolume, a stick's folder bound elsewhere).
    public static func boundRoot(of path: String, mountinfo: String) -> String {
        boundRoot(of: mount(of: path, mountinfo: mountinfo), mountinfo: mountinfo)
    }

    /// `boundRoot` of a mount already found among `mountinfo`'s lines.
    static func boundRoot(of mount: (point: String, type: String, readOnly: Bool, readOnlyView: Bool, root: String, device: String),
                          mountinfo: String) -> String {
        guard mount.root != "/", mount.point != "/" else { return "/" }
        let parent = (mount.point as NSString).deletingLastPathComponent
        return mount.device == self.mount(of: parent.isEmpty ? "/" : parent, mountinfo: mountinfo).device ? mount.root : "/"
    }

    /// `bad_path` when the mount holding `target` is read-only: a read-only view of a writable
    /// file system (cairnd's unit, ProtectSystem=strict, sees all but `ReadWritePaths=` so,
    /// while the stick is writable from a shell), or a stick mounted read-only (a write-protect
    /// switch, or the kernel remounted a FAT stick after errors). Else the first write failed
    /// as `export_failed` with "Read-only file system", no lead for either.
    /// `folder`: the target's nearest existing folder, which `ReadWritePaths=` can name.
    public static func readOnlyProblem(target: String, folder: String, mountPoint: String, readOnly: Bool,
                                       readOnlyView: Bool) -> SyncError? {
        guard readOnly else { return nil }
        if readOnlyView {
            return SyncError(.badPath, "cairnd sees \(target) read-only, through a read-only bind mount of a writable file system (as its unit's ProtectSystem=strict makes of a folder outside ReadWritePaths=): add \(folder) to ReadWritePaths= in cairnd's unit, or export elsewhere; nothing was written")
        }
        return SyncError(.badPath, "\(target) is on a file system mounted read-only at \(mountPoint) (a write-protect switch, or the kernel remounted it after errors: check the stick, then mount it read-write); nothing was written")
    }

    /// The type of the mount, among the lines of `mountinfo` (proc(5)), that holds `path`: the
    /// one whose mount point is the longest prefix of it; "" when none is.
    public static func mountType(of path: String, mountinfo: String) -> String { mount(of: path, mountinfo: mountinfo).type }

    /// The mount that holds `path` (its point and type): the one whose mount point is the
    /// longest prefix of it; ("/", "") when none is. `readOnlyView`: its mount options say `ro`
    /// and its file system's (super) options `rw`, a read-only bind mount of a writable file
    /// system, as systemd's ProtectSystem=strict makes.
    /// `root`: the folder of its file system mounted there (mountinfo's fourth field): "/" for a
    /// whole file system (a stick), a folder for a bind mount (or a btrfs subvolume);
    /// `device`: its file system's major:minor.
    public static func mount(of path: String, mountinfo: String)
        -> (point: String, type: String, readOnly: Bool, readOnlyView: Bool, root: String, device: String) {
        var best = (point: "/", type: "", readOnly: false, readOnlyView: false, root: "/", device: "", length: -1)
        for line in mountinfo.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count > 5, let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count else { continue }
            let point = unescape(fields[4])
            let holds = point == "/" || path == point || path.hasPrefix(point + "/")
            guard holds, point.count >= best.length else { continue }
            let superReadOnly = dash + 3 < fields.count && fields[dash + 3].split(separator: ",").contains("ro")
            // The kernel marks only the file system read-only when it remounts it after errors
            // (FAT's default, ext4's errors=remount-ro): the mount's own options still say rw.
            let mountReadOnly = fields[5].split(separator: ",").contains("ro")
            best = (point, String(fields[dash + 1]), mountReadOnly || superReadOnly, mountReadOnly && !superReadOnly,
                    unescape(fields[3]), String(fields[2]), point.count)
        }
        return (best.point, best.type, best.readOnly, best.readOnlyView, best.root, best.device)
    }

    /// `bad_path` when `real` (a target's nearest existing folder, links resolved) lies under
    /// /media, /mnt or /run/media but its mount point is neither that folder nor below it
    /// (a stick mounted at /mnt itself counts), or is a folder of the file system beneath bound
    /// there (`mountRoot`, else "/"): systemd's `ReadWritePaths=/media` binds /media onto
    /// itself in cairnd's namespace, which is no stick. The stick is not mounted, and the export would fill the
    /// device's own disk while the user believes it on the stick.
    public static func unmountedMediaProblem(target: String, real: String, mountPoint: String, mountRoot: String = "/") -> SyncError? {
        guard let root = removableMediaRoots.first(where: { real == $0 || real.hasPrefix($0 + "/") }) else { return nil }
        let onStick = (mountPoint == root || mountPoint.hasPrefix(root + "/")) && mountRoot == "/"
        guard !onStick else { return nil }
        let mounted = mountRoot == "/" ? "mounted at \(mountPoint)" : "\(mountRoot) bound at \(mountPoint)"
        return SyncError(.badPath, "nothing is mounted at \(target): it is on the device's own disk (\(mounted)), not on a stick under \(root); mount the stick, or export to a folder outside \(removableMediaRoots.joined(separator: ", ")); nothing was written")
    }

    /// `bad_path` when this process may not enter or write into `target`'s nearest existing
    /// folder (EACCES), naming that folder and the user; nil otherwise, also for
    /// errors the write itself reports better (a read-only stick, a file that is not a folder).
    public static func accessProblem(target: String) -> SyncError? {
        var probe = (target as NSString).standardizingPath
        var info = stat()
        while stat(probe, &info) != 0 {
            guard [ENOENT, ENOTDIR, EACCES].contains(errno), probe != "/" else { return nil }
            probe = (probe as NSString).deletingLastPathComponent
        }
        // Something that is not a folder is refused as that, below.
        // access(2), not faccessat's AT_EACCESS: glibc makes that faccessat2, which an older
        // container's seccomp profile answers EPERM, and every export would be refused. EACCES
        // alone: EPERM is an immutable folder, which the write reports as itself.
        guard info.st_mode & S_IFMT == S_IFDIR, access(probe, W_OK | X_OK) != 0, errno == EACCES else { return nil }
        let user = FileSystem.userName(of: geteuid()) ?? "uid \(geteuid())"
        return SyncError(.badPath, "cairnd (user \(user)) may not write into \(probe) (permission denied), so not into \(target): a desktop mounts a stick for its own user alone (under /media/USER or /run/media/USER); mount it where user \(user) may write, or give that user access to \(probe); nothing was written")
    }

    /// mountinfo's octal escapes (`\040` for a space) decoded.
    static func unescape(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        var index = field.utf8.startIndex
        let utf8 = field.utf8
        while index < utf8.endIndex {
            let byte = utf8[index]
            let next = utf8.index(index, offsetBy: 4, limitedBy: utf8.endIndex)
            if byte == UInt8(ascii: "\\"), let next, let value = UInt8(String(decoding: utf8[utf8.index(after: index)..<next], as: UTF8.self), radix: 8) {
                bytes.append(value)
                index = next
            } else {
                bytes.append(byte)
                index = utf8.index(after: index)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Nil when a file system of `fileSystem` can take blobs of `files` bytes and the small
    /// files; else the refusal: `bad_path` for a FAT file system and a blob of 4 GiB or more,
    /// `disk_full` for too little free space.
    public static func problem(target: String, fileSystem: (type: String, free: Int64), files: [Int64]) -> SyncError? {
        let largest = files.max() ?? 0
        if fatTypes.contains(fileSystem.type), largest > fatLargestFile {
            return SyncError(.badPath, "\(target) is on a FAT file system, which holds no file over 4 GiB, and the snapshot blob is \(bytes(largest)); format the stick exFAT or ext4, or use another folder; nothing was written")
        }
        let needed = files.reduce(smallFiles, +)
        if fileSystem.free < needed {
            return SyncError(.diskFull, "the export needs \(bytes(needed)) but the file system of \(target) has \(bytes(fileSystem.free)) free; free some space or use a larger stick; nothing was written")
        }
        return nil
    }

    static func bytes(_ count: Int64) -> String { ByteCountFormatter.string(fromByteCount: count, countStyle: .file) }
}

extension Syncer {
    /// Writes a repository copy of the installed version into `target` (absent or empty),
    /// after any running attempt; no install or rollback runs meanwhile.
    public func export(to target: String) async throws(SyncError) -> ExportResult {
        try await export(to: target, stopping: { Stopping.isRequested })
    }

    /// `export(to:)`, asking `stopping` between its steps (tests stand in for SIGTERM with it).
    func export(to target: String, stopping: @escaping @Sendable () -> Bool) async throws(SyncError) -> ExportResult {
        var exporter = Exporter(directory: directory, trustedKeys: configuration.trustedKeys,
                                pinnedRoot: configuration.trustedRoot, freeSpaceMargin: configuration.freeSpaceMargin, logger: logger)
        exporter.stopping = stopping
        return try await exclusively { () async throws(SyncError) -> ExportResult in
            await stopSpare()
            // Status says what holds the syncer: an attempt asked for meanwhile waits for it.
            progress.operating(.export, at: now())
            defer { progress.operating(nil, at: now()) }
            let exporter = exporter
            return try await BackgroundWork.run { () throws(SyncError) in try exporter.export(to: target) }
        }
    }
}
