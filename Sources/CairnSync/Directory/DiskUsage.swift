import Foundation

public enum DiskUsage {
    /// Bytes in all regular files under `path`, symlinks not followed; 0 when absent.
    public static func bytes(under path: String) -> Int64 {
        guard let walker = FileManager.default.enumerator(atPath: path) else { return 0 }
        var total: Int64 = 0
        while let relative = walker.nextObject() as? String {
            var info = stat()
            let full = (path as NSString).appendingPathComponent(relative)
            if lstat(full, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG { total += Int64(info.st_size) }
        }
        return total
    }
}
