import CairnStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An export's marker in its target (`Exporter.unfinishedMarker`), held open and locked
/// (`flock`) from the export's first write to its last, so that an export by another process
/// (a second cairnd, for another channel, into the same stick) finds it live, not cut short,
/// and neither removes the other's files. A marker no process holds is one a cut-short export
/// left. Where the file system takes no locks, only the claim within this process holds.
final class ExportMarker {
    let path: String
    private let fd: Int32

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    deinit { close(fd) }

    /// The marker an earlier export left in `target`, taken over; `export_target_not_empty`
    /// when an export running now holds it.
    static func takeOver(in target: String) throws(SyncError) -> ExportMarker {
        let path = target + "/" + Exporter.unfinishedMarker
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else {
            // Gone since it was seen: the export that held it finished, or gave up and removed it.
            if errno == ENOENT { throw changed(target) }
            throw SyncError.system("cannot open \(path)")
        }
        return try locked(ExportMarker(path: path, fd: fd), in: target)
    }

    /// A new marker in the empty folder `target`, durable before anything else is written;
    /// `export_target_not_empty` when another export made one first.
    static func create(in target: String) throws(SyncError) -> ExportMarker {
        let path = target + "/" + Exporter.unfinishedMarker
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            if errno == EEXIST { throw busy(target) }
            throw SyncError.system("cannot write into \(target)")
        }
        let marker = try locked(ExportMarker(path: path, fd: fd), in: target)
        do { try FileSystem.syncDirectory(target) } catch {
            throw SyncError.writing("cannot write into \(target): \(error.message)", error)
        }
        return marker
    }

    /// Removes the marker: the export is whole. Its lock ends when the marker is released.
    func remove() throws(SyncError) {
        guard unlink(path) == 0 else { throw SyncError.system("cannot finish the export: cannot remove \(path)") }
    }

    /// `marker` once locked, and still the file its path names (an export that finished while
    /// this one waited removed the one it held).
    private static func locked(_ marker: ExportMarker, in target: String) throws(SyncError) -> ExportMarker {
        while flock(marker.fd, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            if errno == EWOULDBLOCK { throw busy(target) }
            // No locks on this file system (ENOLCK): the claim within this process, as before.
            break
        }
        var held = stat(), named = stat()
        guard fstat(marker.fd, &held) == 0, stat(marker.path, &named) == 0, held.st_dev == named.st_dev, held.st_ino == named.st_ino else {
            throw changed(target)
        }
        return marker
    }

    private static func busy(_ target: String) -> SyncError {
        SyncError(.exportTargetNotEmpty, "another export is writing into \(target) now; export into a new or empty folder")
    }

    private static func changed(_ target: String) -> SyncError {
        SyncError(.exportTargetNotEmpty, "another export wrote into \(target) meanwhile; export into a new or empty folder")
    }
}
