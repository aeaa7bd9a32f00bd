import CairnCore
import CairnIndex
import CairnStore
import CairnThreads
import Foundation
import Logging

/// Writes a repository (protocol/repository.md) holding exactly the installed version, for
/// another device to sync from with a `file://` source: blobs first, then the root chain the
/// device accepted (`root/<n>.root.json`), then `channels/<c>/versions/<n>.json`, then `manifest.json`, each checked against the signed
/// manifest before it is written.
struct Exporter {
    let directory: DataDirectory
    let trustedKeys: [PublicKey]
    /// The pinned root, whose chain the export carries; nil for a device pinned to keys.
    let pinnedRoot: [UInt8]?
    let logger: Logger

    func export(to target: String) throws(SyncError) -> ExportResult {
        guard target.hasPrefix("/"), target.count > 1 else {
            throw SyncError(.badPath, "export needs an absolute folder path")
        }
        guard let installed = directory.installed() else {
            throw SyncError(.notInstalled, "no version is installed; nothing to export")
        }
        let existed = FileSystem.exists(target)
        if existed, !directory.entries(target).isEmpty {
            throw SyncError(.exportTargetNotEmpty, "\(target) is not empty; export into a new or empty folder")
        }
        do {
            return try write(installed, to: target)
        } catch {
            // Leave nothing half-written behind: a partial repository must not look like a source.
            if existed {
                for entry in directory.entries(target) { try? FileManager.default.removeItem(atPath: target + "/" + entry) }
            } else {
                try? FileManager.default.removeItem(atPath: target)
            }
            throw error
        }
    }

    private func write(_ installed: InstalledVersion, to target: String) throws(SyncError) -> ExportResult {
        let manifest = installed.manifest
        let repository = BlobStore(root: target)
        var files = 0
        var bytes: Int64 = 0
        func put(_ content: [UInt8], as id: ContentID, what: String) throws(SyncError) {
            guard ContentID(hashing: content) == id else {
                throw SyncError(.hashMismatch, "\(what) of version \(installed.version) does not match its signed SHA-256; not exported")
            }
            do { try repository.put(content) } catch { throw SyncError.writing("cannot write \(what) into \(target): \(error.message)", error) }
            files += 1
            bytes += Int64(content.count)
        }

        let (snapshot, origin) = try snapshotBlob(installed)
        defer { if origin == .rebuilt { unlink(snapshot) } }
        do { try repository.put(file: snapshot, id: manifest.snapshot.sha256) } catch {
            throw SyncError.writing("cannot write the snapshot blob into \(target): \(error.message)", error)
        }
        files += 1
        bytes += Int64(manifest.snapshot.size)
        if !manifest.model.files.isEmpty {
            guard let model = installed.modelDirectory else {
                throw SyncError(.io, "version \(installed.version)'s model files are not on this device; nothing exported")
            }
            for file in manifest.model.files {
                try put(try read(model + "/" + file.name), as: file.sha256, what: "model file \(file.name)")
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
                try FileSystem.writeAtomically(root.bytes, to: target + "/root/" + DataDirectoryLayout.rootFile(root.version))
                files += 1
            }
            for key in trustedKeys where (try? SignedManifest.decodeAndVerify(signed, trustedKeys: [key])) != nil {
                try FileSystem.makeDirectory(target + "/keys")
                try FileSystem.writeAtomically(Array(key.fileText.utf8), to: "\(target)/keys/\(key.keyID.hex).pub")
                files += 1
            }
            try FileSystem.writeAtomically(signed, to: "\(channel)/versions/\(manifest.version).json")
            try FileSystem.writeAtomically(signed, to: "\(channel)/manifest.json")
            try FileSystem.syncDirectory(target)
        } catch {
            throw SyncError.writing("cannot write the manifest into \(target): \(error.message)", error)
        }
        files += 2
        bytes += Int64(signed.count) * 2
        logger.info("exported", metadata: ["cairn.sync.version": "\(installed.version)", "cairn.sync.path": "\(target)",
                                           "cairn.sync.snapshot": "\(origin.rawValue)"])
        return ExportResult(to: target, channel: manifest.channel, version: installed.version,
                            stateRoot: installed.stateRoot.hex, snapshot: origin, files: files, bytes: bytes)
    }

    /// A file holding the signed snapshot bytes (its SHA-256 checked): the blob kept at install,
    /// else one rebuilt from the index into the staging folder (the caller removes it). Both are
    /// passes over files: a version of any size is exported in flat memory.
    private func snapshotBlob(_ installed: InstalledVersion) throws(SyncError) -> (String, ExportResult.SnapshotOrigin) {
        let signed = installed.manifest.snapshot
        if FileSystem.exists(installed.snapshotBlobPath) {
            if let kept = try? FileSystem.sha256(of: installed.snapshotBlobPath), kept.id == signed.sha256, kept.size == signed.size {
                return (installed.snapshotBlobPath, .kept)
            }
            logger.warning("the kept snapshot blob does not match its hash; rebuilding it",
                           metadata: ["cairn.sync.version": "\(installed.version)"])
        }
        let scratch = "\(directory.stagingPath)/export-\(installed.version).sqlite", blob = scratch + ".blob"
        unlink(scratch)
        unlink(blob)
        defer { unlink(scratch) }
        let compressed: Zlib.Compressed
        do {
            try SnapshotWriter.rebuild(from: installed.indexPath, to: scratch)
            compressed = try Zlib.compressFile(scratch, to: blob, level: 9)
        } catch {
            unlink(blob)
            throw SyncError(.io, "cannot rebuild the snapshot of version \(installed.version): \(error)")
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

    private func read(_ path: String) throws(SyncError) -> [UInt8] {
        do { return try FileSystem.read(path) } catch { throw SyncError(.io, "cannot read \(path)", cause: error) }
    }
}

extension Syncer {
    /// Writes a repository copy of the installed version into `target` (absent or empty),
    /// after any running attempt; no install or rollback runs meanwhile.
    public func export(to target: String) async throws(SyncError) -> ExportResult {
        let exporter = Exporter(directory: directory, trustedKeys: configuration.trustedKeys,
                                pinnedRoot: configuration.trustedRoot, logger: logger)
        return try await exclusively { () async throws(SyncError) -> ExportResult in
            try await BackgroundWork.run { () throws(SyncError) in try exporter.export(to: target) }
        }
    }
}
