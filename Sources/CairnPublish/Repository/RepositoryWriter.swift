import CairnCore
import CairnStore
import Foundation

/// The writes of a publish, each crash-safe (temporary file, fsync, rename, fsync the folder),
/// made in the order of protocol/publishing.md: blobs, then `versions/<n>.json`, then
/// `manifest.json`.
struct RepositoryWriter {
    let repository: Repository
    let channel: String

    /// `bytes` stored as a blob; its id when a damaged file of its name was written again.
    func putBlob(_ bytes: [UInt8]) throws(PublishError) -> ContentID? {
        do {
            let (id, stored) = try repository.blobs.store(bytes)
            return stored == .repaired ? id : nil
        } catch {
            throw PublishError(.io, "cannot store a blob: \(error.message)", cause: error)
        }
    }

    /// The file at `path`, whose SHA-256 is `id`, stored as a blob; `id` when a damaged file of
    /// its name was written again.
    func putBlob(file path: String, id: ContentID) throws(PublishError) -> ContentID? {
        do { return try repository.blobs.put(file: path, id: id) == .repaired ? id : nil } catch {
            throw PublishError(.io, "cannot store a blob: \(error.message)", cause: error)
        }
    }

    /// `keys/<key id>.pub`, so that `verify` finds the key without being told.
    func storePublicKey(_ key: PublicKey) throws(PublishError) {
        let path = repository.keysFolder + "/\(key.keyID.hex).pub"
        guard !FileSystem.exists(path) else { return }
        do {
            try FileSystem.makeDirectory(repository.keysFolder)
            try FileSystem.writeAtomically(Array(key.fileText.utf8), to: path)
        } catch {
            throw PublishError(.io, "cannot store the public key: \(error.message)", cause: error)
        }
    }

    /// `versions/<n>.json`, which must not exist yet (version files are immutable).
    func writeVersion(_ version: Int, bytes: [UInt8]) throws(PublishError) {
        let path = repository.versionPath(channel, version)
        do { try FileSystem.createAtomically(bytes, at: path) } catch {
            throw PublishError.creating(path, error)
        }
    }

    /// `staged/<channel>/<n>.json`: a signed manifest waiting for more signatures; returns its path.
    func writeStaged(_ version: Int, bytes: [UInt8]) throws(PublishError) -> String {
        let path = repository.stagedPath(channel, version)
        do {
            try FileSystem.makeDirectory(repository.stagedFolder(channel))
            try FileSystem.createAtomically(bytes, at: path)
        } catch {
            throw PublishError.creating(path, error)
        }
        return path
    }

    /// Replaces `manifest.json` atomically: the moment the new version becomes current.
    func writeCurrent(_ bytes: [UInt8]) throws(PublishError) {
        let path = repository.manifestPath(channel)
        do { try FileSystem.writeAtomically(bytes, to: path) } catch {
            throw PublishError(.io, "cannot write \(path): \(error.message)", cause: error)
        }
    }
}

/// The leftovers a killed publish may leave inside the repository.
enum TemporaryFiles {
    /// Removes `.tmp-*` files (half-written blobs and manifests of a killed publish). Called
    /// with the publish lock held, so no live writer owns them.
    static func removeLeftovers(in repository: Repository) {
        let manager = FileManager.default
        var folders = repository.channels().flatMap { [repository.channelFolder($0), repository.versionsFolder($0)] }
        folders += [repository.keysFolder, repository.rootFolder]
        folders += repository.channels().map(repository.stagedFolder)
        let fanout = repository.root + "/blobs/sha256"
        folders += ((try? manager.contentsOfDirectory(atPath: fanout)) ?? []).map { fanout + "/" + $0 }
        for folder in folders {
            for name in (try? manager.contentsOfDirectory(atPath: folder)) ?? [] where name.hasPrefix(".tmp-") {
                try? manager.removeItem(atPath: folder + "/" + name)
            }
        }
    }
}
