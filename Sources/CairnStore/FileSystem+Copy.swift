#if canImport(Glibc)
import Glibc
#endif

extension FileSystem {
    /// Copies the file at `source` to `destination` (which must not exist) inside the kernel:
    /// `copy_file_range(2)`, which on file systems that share extents (btrfs, XFS, kernel ≥ 5.3)
    /// clones instead of copying; a plain read/write loop where the call is missing or refused
    /// (another file system, an old kernel). Does not fsync: the caller syncs the finished file
    /// once. On failure the partial destination is removed. `stopping`, when given, is asked
    /// between pieces (64 MiB in the kernel, 1 MiB otherwise): true stops the copy (an `.io`
    /// error, ECANCELED).
    public static func copyFile(from source: String, to destination: String,
                                stopping: (() -> Bool)? = nil) throws(StoreError) {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw failure("cannot open", source) }
        defer { close(input) }
        let output = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard output >= 0 else { throw failure("cannot create", destination) }
        defer { close(output) }
        do throws(StoreError) {
            if try !copyInKernel(input, output, path: destination, stopping: stopping) {
                guard ftruncate(output, 0) == 0, lseek(input, 0, SEEK_SET) == 0, lseek(output, 0, SEEK_SET) == 0 else {
                    throw failure("cannot rewind", destination)
                }
                try copyInUserSpace(input, output, path: destination, stopping: stopping)
            }
        } catch {
            unlink(destination)
            throw error
        }
    }

    private typealias CopyFileRange = @convention(c) (Int32, UnsafeMutablePointer<Int64>?, Int32,
                                                      UnsafeMutablePointer<Int64>?, Int, UInt32) -> Int

    /// glibc ≥ 2.27 has `copy_file_range`, but the Glibc module does not export it (it is behind
    /// `_GNU_SOURCE`); it is looked up once by name.
    nonisolated(unsafe) private static let copyFileRange: CopyFileRange? = dlsym(nil, "copy_file_range")
        .map { unsafeBitCast($0, to: CopyFileRange.self) }

    /// True when the kernel copied the whole file; false when it cannot (nothing useful written).
    private static func copyInKernel(_ input: Int32, _ output: Int32, path: String,
                                     stopping: (() -> Bool)?) throws(StoreError) -> Bool {
        guard let copyFileRange else { return false }
        var copied = 0
        while true {
            if stopping?() == true { throw failure("stopped copying into", path, ECANCELED) }
            let result = copyFileRange(input, nil, output, nil, stopping == nil ? 1 << 30 : 64 << 20, 0)
            if result == 0 { return true }
            if result > 0 { copied += result; continue }
            if errno == EINTR { continue }
            if copied == 0, [ENOSYS, EXDEV, EINVAL, EOPNOTSUPP, EBADF].contains(errno) { return false }
            throw failure("cannot copy into", path)
        }
    }

    private static func copyInUserSpace(_ input: Int32, _ output: Int32, path: String,
                                        stopping: (() -> Bool)?) throws(StoreError) {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            if stopping?() == true { throw failure("stopped copying into", path, ECANCELED) }
            let count = buffer.withUnsafeMutableBytes { Glibc.read(input, $0.baseAddress!, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure("cannot read for", path)
            }
            if count == 0 { return }
            try writeAll(output, Array(buffer[0..<count]), path: path)
        }
    }
}
