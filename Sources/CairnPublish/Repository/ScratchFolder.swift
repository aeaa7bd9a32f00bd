import CairnStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A folder for a publish's or a verify's scratch files, removed by `remove()`. At a million
/// chunks it holds gigabytes (the snapshot being written, its staging table, the earlier
/// versions a delta is built from), which a killed process cannot remove. So the process holds
/// `flock` on the folder's `owner.lock` while it lives (the kernel drops the lock when the
/// process dies), and every new scratch folder first removes the folders whose lock is free.
///
/// The folders live in `<TMPDIR>/cairn-publish-<uid>/`, made 0700 and refused unless it is a
/// folder of this user's (not a symlink): only this user's processes can place anything there,
/// so nothing another user made in a shared `/tmp` is ever removed. (`flock` on NFS falls back
/// to per-process locks: keep `TMPDIR` on a local file system.)
final class ScratchFolder {
    static let lockName = "owner.lock"
    /// How old a folder still under its hidden name must be before it is taken for abandoned:
    /// its maker died between making it and locking it.
    static let hiddenAge: TimeInterval = 3600

    let path: String
    private let lock: Int32

    /// This user's folder of scratch folders in `temporary`.
    static func parent(in temporary: String) -> String {
        (temporary as NSString).appendingPathComponent("cairn-publish-\(getuid())")
    }

    /// - Parameter temporary: the temporary folder; another only in tests.
    init(in temporary: String = NSTemporaryDirectory()) throws(PublishError) {
        let parent = Self.parent(in: temporary)
        do { try FileSystem.makePrivateDirectory(parent) } catch {
            throw PublishError(.io, "\(error.message); set TMPDIR to another folder", cause: error)
        }
        Self.removeAbandoned(in: parent)
        let name = UUID().uuidString
        // Made under a hidden name and renamed once locked: a folder under its visible name
        // always has its lock taken while its owner lives.
        let hidden = parent + "/." + name
        let path = parent + "/" + name
        guard mkdir(hidden, 0o700) == 0 else {
            throw PublishError(.io, "cannot create a temporary folder in \(parent): \(String(cString: strerror(errno)))")
        }
        let lock = open(hidden + "/" + Self.lockName, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard lock >= 0, flock(lock, LOCK_EX | LOCK_NB) == 0, rename(hidden, path) == 0 else {
            let error = PublishError(.io, "cannot create a temporary folder in \(parent): \(String(cString: strerror(errno)))")
            if lock >= 0 { close(lock) }
            try? FileManager.default.removeItem(atPath: hidden)
            throw error
        }
        self.path = path
        self.lock = lock
    }

    deinit {
        close(lock)
    }

    /// Removes the folder and everything in it.
    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Removes the scratch folders in `parent` that no live process owns: their lock is free, or
    /// they are still under their hidden name after `hiddenAge`. A folder without a lock file is
    /// not one of these and is left.
    static func removeAbandoned(in parent: String) {
        let manager = FileManager.default
        for name in (try? manager.contentsOfDirectory(atPath: parent)) ?? [] {
            let folder = parent + "/" + name
            if name.hasPrefix(".") {
                if let modified = (try? manager.attributesOfItem(atPath: folder))?[.modificationDate] as? Date,
                   modified < Date().addingTimeInterval(-hiddenAge) {
                    try? manager.removeItem(atPath: folder)
                }
                continue
            }
            let lock = open(folder + "/" + lockName, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
            guard lock >= 0 else { continue }
            // Free only when its owner is gone; held while the folder is removed.
            if flock(lock, LOCK_EX | LOCK_NB) == 0 { try? manager.removeItem(atPath: folder) }
            close(lock)
        }
    }
}
