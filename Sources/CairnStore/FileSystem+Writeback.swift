#if canImport(Glibc)
import Glibc
#endif

extension FileSystem {
    private typealias SyncFileRange = @convention(c) (Int32, Int64, Int64, UInt32) -> Int32

    /// `sync_file_range(2)` is behind `_GNU_SOURCE` in glibc, which the Glibc module does not
    /// export; it is looked up once by name.
    private static let syncFileRange: SyncFileRange? = dlsym(nil, "sync_file_range")
        .map { unsafeBitCast($0, to: SyncFileRange.self) }

    /// Asks the kernel to start writing the file's dirty pages to disk now and returns at once
    /// (`sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE)`), so that the disk works while the
    /// caller checks the file and its later fsync waits less. No durability promise: the caller
    /// still fsyncs before relying on the file. Does nothing where the call is missing.
    public static func startWriteback(_ fd: Int32) {
        _ = syncFileRange?(fd, 0, 0, 2 /* SYNC_FILE_RANGE_WRITE */)
    }

    /// `startWriteback` of the file at `path` (ignored when it cannot be opened).
    public static func startWriteback(path: String) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        startWriteback(fd)
        close(fd)
    }
}
