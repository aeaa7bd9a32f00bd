import Foundation

public enum DiskUsage {
    /// Bytes in all regular files under `path`, symlinks not followed, a file with several hard
    /// links (a rows file two versions share) once; 0 when absent.
    public static func bytes(under path: String) -> Int64 {
        guard let walker = FileManager.default.enumerator(atPath: path) else { return 0 }
        var total: Int64 = 0
        var linked: Set<[UInt64]> = []
        while let relative = walker.nextObject() as? String {
            var info = stat()
            let full = (path as NSString).appendingPathComponent(relative)
            guard lstat(full, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            if info.st_nlink > 1, !linked.insert([UInt64(info.st_dev), UInt64(info.st_ino)]).inserted { continue }
            total += Int64(info.st_size)
        }
        return total
    }
}
