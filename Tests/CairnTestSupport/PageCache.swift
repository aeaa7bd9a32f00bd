import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The page cache as tests see it: a file written by the test is dropped from it, so that what
/// reads it next reads the disk, as on a device whose previous version was not read for weeks.
public enum PageCache {
    /// fsync, then POSIX_FADV_DONTNEED: the file's pages (clean after the fsync) leave the cache.
    /// False when the file cannot be opened or either call fails.
    public static func drop(_ path: String) -> Bool {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return fsync(fd) == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0
    }

    /// Whether files in the temporary folder are cached and can leave the cache (not on tmpfs,
    /// whose pages are the files): one page written, seen in the cache, fsynced and dropped,
    /// then looked for again.
    public static let dropsPages: Bool = {
        let path = NSTemporaryDirectory() + "cairn-page-probe-" + UUID().uuidString
        guard FileManager.default.createFile(atPath: path, contents: Data(repeating: 7, count: 4096)) else { return false }
        defer { unlink(path) }
        return residentPages(path)?.isEmpty == false && drop(path) && residentPages(path)?.isEmpty == true
    }()

    /// The page numbers of `path` that are in the page cache (mincore(2) over a map of it).
    public static func residentPages(_ path: String) -> Set<Int>? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let size = Int(lseek(fd, 0, SEEK_END)), page = Int(sysconf(Int32(_SC_PAGESIZE)))
        guard size > 0, let map = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else { return nil }
        defer { munmap(map, size) }
        var vector = [UInt8](repeating: 0, count: (size + page - 1) / page)
        guard mincore(map, size, &vector) == 0 else { return nil }
        return Set(vector.indices.filter { vector[$0] & 1 == 1 })
    }
}
