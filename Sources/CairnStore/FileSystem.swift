public import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The file operations a crash-safe store needs, on file descriptors so that every step can be
/// fsynced: write once to a temporary name, fsync, rename into place, fsync the directory.
public enum FileSystem {
    static func failure(_ what: String, _ path: String, _ code: Int32 = errno) -> StoreError {
        let kind: StoreError.Code = switch code {
        case ENOSPC, EDQUOT, EFBIG: .diskFull
        case EROFS, EACCES, EPERM: .readOnly
        case ENOENT: .notFound
        default: .io
        }
        return StoreError(kind, "\(what) \(path): \(String(cString: strerror(code)))", errno: code)
    }

    /// Writes `bytes` to `path` atomically: a temporary file in the same folder, written in full,
    /// fsynced, renamed over `path`, and the folder fsynced. Readers see the old file or the new.
    public static func writeAtomically(_ bytes: [UInt8], to path: String, mode: mode_t = 0o644) throws(StoreError) {
        let temporary = try writeTemporary(bytes, beside: path, mode: mode)
        guard rename(temporary, path) == 0 else {
            let error = failure("cannot rename into", path)
            unlink(temporary)
            throw error
        }
        try syncDirectory((path as NSString).deletingLastPathComponent)
    }

    /// As `writeAtomically`, but never replaces a file at `path`: the temporary file is linked
    /// in, which fails with `EEXIST` (the error's `errno`) when another writer got there first,
    /// even one on another host that a lock did not stop. Where the file system makes no hard
    /// links, the check and the rename are two steps, as before.
    public static func createAtomically(_ bytes: [UInt8], at path: String, mode: mode_t = 0o644) throws(StoreError) {
        let temporary = try writeTemporary(bytes, beside: path, mode: mode)
        defer { unlink(temporary) }
        if link(temporary, path) != 0 {
            let code = errno
            var info = stat()
            // NFS may answer EEXIST to a retransmitted link that did succeed: the temporary file
            // then has two names.
            let linked = code == EEXIST && stat(temporary, &info) == 0 && info.st_nlink == 2
            if !linked {
                guard [EPERM, EOPNOTSUPP, ENOSYS, EMLINK].contains(code) else { throw failure("cannot link into", path, code) }
                guard !exists(path) else { throw failure("cannot create", path, EEXIST) }
                guard rename(temporary, path) == 0 else { throw failure("cannot rename into", path) }
            }
        }
        try syncDirectory((path as NSString).deletingLastPathComponent)
    }

    /// A temporary file beside `path` holding `bytes`, fsynced and closed; removed on failure.
    private static func writeTemporary(_ bytes: [UInt8], beside path: String, mode: mode_t) throws(StoreError) -> String {
        let folder = (path as NSString).deletingLastPathComponent
        let temporary = (folder as NSString).appendingPathComponent(".tmp-\(UUID().uuidString)")
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw failure("cannot create", temporary) }
        do throws(StoreError) {
            try writeAll(fd, bytes, path: temporary)
            guard fsync(fd) == 0 else { throw failure("cannot fsync", temporary) }
            guard close(fd) == 0 else { throw failure("cannot close", temporary) }
        } catch {
            close(fd)
            unlink(temporary)
            throw error
        }
        return temporary
    }

    /// Writes `bytes` to a new file at `path` (which must not exist) and starts its writeback;
    /// not fsynced: for a file in a folder that is fsynced, with it, before anything names it.
    public static func writeNew(_ bytes: [UInt8], to path: String, mode: mode_t = 0o644) throws(StoreError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw failure("cannot create", path) }
        defer { close(fd) }
        try writeAll(fd, bytes, path: path)
        startWriteback(fd)
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws(StoreError) {
        var written = 0
        while written < bytes.count {
            let result = bytes.withUnsafeBytes { raw in
                write(fd, raw.baseAddress! + written, raw.count - written)
            }
            if result < 0 {
                if errno == EINTR { continue }
                throw failure("cannot write", path)
            }
            written += result
        }
    }

    /// fsync on a folder, so that a rename or a new entry in it survives a power cut.
    public static func syncDirectory(_ path: String) throws(StoreError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw failure("cannot open folder", path) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw failure("cannot fsync folder", path) }
    }

    /// Starts writing `fd`'s dirty pages to disk without waiting for them (Linux
    /// `sync_file_range(SYNC_FILE_RANGE_WRITE)`), so that the fsync that makes the file durable
    /// later finds them written. A hint: durability still takes that fsync.
    public static func startWriteback(_ fd: Int32) {
        _ = syncFileRange?(fd, 0, 0, syncFileRangeWrite)
    }

    /// `startWriteback` on the file at `path` (nothing when it cannot be opened).
    public static func startWriteback(path: String) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        startWriteback(fd)
        close(fd)
    }

    /// A file written once from front to back that the page cache need not keep (a snapshot blob
    /// inflated as it downloads and kept for export; the index inflated from it, which on a small
    /// device cannot stay cached until the pass that checks it): its pages leave the page cache
    /// behind the writer instead of filling it. Every `window` bytes, the writeback of the newest window
    /// starts, and the window before it, whose writeback was started one window earlier, is
    /// waited for and dropped from the cache (`sync_file_range`, `POSIX_FADV_DONTNEED`). On a
    /// device with less memory than the file, those pages would otherwise push out the pages of
    /// the index that answers queries meanwhile. At most two windows of the file stay dirty or
    /// cached; the wait is for a write started one window earlier. Durability still takes the
    /// caller's fsync, but a write error found by the wait is returned here: the wait consumes
    /// it, and that fsync would no longer see it.
    public struct WriteBehind {
        public static let window: Int64 = 32 << 20
        private let window: Int64
        /// The bytes before this offset have had their writeback started.
        private var submitted: Int64 = 0
        /// The bytes before this offset were dropped from the cache.
        private var dropped: Int64 = 0
        /// Set when the file system (or a sandbox) does not offer `sync_file_range`: the file is
        /// then written as any other.
        private var unsupported = false

        /// For a file written from its first byte.
        public init(window: Int64 = WriteBehind.window) {
            self.window = window
        }

        /// After the bytes of `fd` up to `end` were written: 0, or the errno of a write that
        /// failed on its way to disk (EIO, ENOSPC…).
        public mutating func wrote(upTo end: Int64, fd: Int32) -> Int32 {
            guard !unsupported, end - submitted >= window, let syncFileRange else { return 0 }
            if submitted > dropped {
                guard syncFileRange(fd, dropped, submitted - dropped, syncFileRangeWaitBefore | syncFileRangeWrite | syncFileRangeWaitAfter) == 0
                else { return failure(errno) }
                #if os(Linux)
                _ = posix_fadvise(fd, off_t(dropped), off_t(submitted - dropped), POSIX_FADV_DONTNEED)
                #endif
                dropped = submitted
            }
            guard syncFileRange(fd, submitted, end - submitted, syncFileRangeWrite) == 0 else { return failure(errno) }
            submitted = end
            return 0
        }

        /// `code` when a write failed; 0 (and nothing more attempted) when the call is not offered.
        private mutating func failure(_ code: Int32) -> Int32 {
            guard [ENOSYS, EINVAL, ESPIPE, EOPNOTSUPP].contains(code) else { return code }
            unsupported = true
            return 0
        }
    }

    private typealias SyncFileRange = @convention(c) (Int32, Int64, Int64, UInt32) -> Int32

    /// `sync_file_range` is behind `_GNU_SOURCE` in glibc's headers, which the Glibc module does
    /// not export (as `copy_file_range`): looked up once by name. `SYNC_FILE_RANGE_WAIT_BEFORE`,
    /// `_WRITE` and `_WAIT_AFTER` are 1, 2 and 4.
    nonisolated(unsafe) private static let syncFileRange: SyncFileRange? = dlsym(nil, "sync_file_range")
        .map { unsafeBitCast($0, to: SyncFileRange.self) }
    private static let syncFileRangeWrite: UInt32 = 2
    private static let syncFileRangeWaitBefore: UInt32 = 1
    private static let syncFileRangeWaitAfter: UInt32 = 4

    /// Creates `path` and its parents (mode 0755) if missing, each new folder's entry fsynced in
    /// its parent, so that a file later fsynced inside it is found after a power cut (or a
    /// stick pulled out unmounted: `cairn export`'s `blobs/sha256/<ab>`, a repository's
    /// before the manifest that names its blobs). `syncingParents: false` for a folder renamed
    /// into place later, whose new parent is fsynced then (an install's `.partial`). The error
    /// names the part of the path that failed: a file where a folder should be, or the folder
    /// that could not be made and the system's reason.
    public static func makeDirectory(_ path: String, syncingParents: Bool = true) throws(StoreError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        var made: [String] = []
        for component in path.split(separator: "/") {
            let parent = prefix.isEmpty ? "/" : prefix
            prefix += "/" + component
            var info = stat()
            if stat(prefix, &info) == 0 {
                guard (info.st_mode & S_IFMT) == S_IFDIR else {
                    throw StoreError(.io, "\(prefix) is not a folder", errno: ENOTDIR)
                }
                continue
            }
            guard mkdir(prefix, 0o755) == 0 || errno == EEXIST else { throw failure("cannot create folder", prefix) }
            made.append(parent)
        }
        guard syncingParents else { return }
        // Deepest first: a folder's own entry is durable before its parent's names it.
        for parent in made.reversed() { try syncDirectory(parent) }
    }

    /// The whole file as UTF-8 text; a file that is not UTF-8 is refused as `.io`.
    public static func readText(_ path: String) throws(StoreError) -> String {
        guard let text = String(validating: try read(path), as: UTF8.self) else {
            throw StoreError(.io, "\(path) is not UTF-8 text")
        }
        return text
    }

    /// The whole file, to its end: also a pipe (`--trusted-root <(…)`) or a `/proc` file, whose
    /// size says 0.
    public static func read(_ path: String) throws(StoreError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw failure("cannot open", path) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure("cannot stat", path) }
        // One byte more than the size, so that a regular file ends in the first pass.
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        var done = 0
        while true {
            if done == bytes.count { bytes += [UInt8](repeating: 0, count: max(bytes.count, 1 << 16)) }
            let result = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + done, $0.count - done) }
            if result < 0 {
                if errno == EINTR { continue }
                throw failure("cannot read", path)
            }
            if result == 0 { break }
            done += result
        }
        if done < bytes.count { bytes.removeSubrange(done...) }
        return bytes
    }

    /// The file at `path` when it is a regular file (not a link, a FIFO or a device: opened
    /// without waiting for a writer) of at most `limit` bytes, read whole; nil otherwise, or
    /// when it cannot be read. For a file someone else put there (a stick's), read only to say
    /// what it holds.
    public static func readRegularFile(_ path: String, atMost limit: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size <= limit else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var done = 0
        while done < bytes.count {
            let result = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + done, $0.count - done) }
            if result < 0, errno == EINTR { continue }
            guard result > 0 else { return nil }
            done += result
        }
        return bytes
    }

    /// Bytes free for an unprivileged writer on the file system holding `path`.
    public static func availableBytes(at path: String) throws(StoreError) -> Int64 {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { throw failure("cannot statvfs", path) }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    public static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    /// Makes `path` (its parent must exist) as a folder only this user can enter (0700), unless
    /// it exists, and refuses it unless it is a folder (not a symlink) that this user owns: in a
    /// shared folder such as `/tmp`, another user could have made it first.
    public static func makePrivateDirectory(_ path: String) throws(StoreError) {
        if mkdir(path, 0o700) != 0, errno != EEXIST { throw failure("cannot create", path) }
        var info = stat()
        guard lstat(path, &info) == 0 else { throw failure("cannot stat", path) }
        guard info.st_mode & S_IFMT == S_IFDIR, info.st_uid == geteuid() else {
            throw StoreError(.io, "\(path) is not a folder this user owns")
        }
    }
}
