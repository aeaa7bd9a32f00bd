public import CairnCore

#if canImport(Glibc)
import Glibc
#endif

extension FileSystem {
    /// A scratch file mapped read-only and unlinked at once: its bytes are then no one else's
    /// to change (nothing can open it again), and they live as page cache of a file, which the
    /// kernel may write back and drop under memory pressure, instead of anonymous memory. The
    /// file's blocks are freed when the mapping is.
    public final class Mapping: StableBytes, @unchecked Sendable {
        public let bytes: UnsafeRawBufferPointer
        /// Its entry in the table that names the file when a read of the mapping fails.
        private let named: Int?

        /// Maps the file at `path` and unlinks it, whether or not the mapping succeeds.
        public init(unlinking path: String) throws(StoreError) {
            defer { unlink(path) }
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw FileSystem.failure("cannot open", path) }
            defer { close(fd) }
            var info = stat()
            guard fstat(fd, &info) == 0 else { throw FileSystem.failure("cannot stat", path) }
            let size = Int(info.st_size)
            guard size > 0 else { throw StoreError(.io, "\(path) is empty") }
            guard let mapped = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), mapped != MAP_FAILED else {
                throw FileSystem.failure("cannot map", path)
            }
            bytes = UnsafeRawBufferPointer(start: mapped, count: size)
            named = MappedFiles.remember(mapped, count: size, path: path)
        }

        deinit {
            MappedFiles.forget(named)
            munmap(UnsafeMutableRawPointer(mutating: bytes.baseAddress), bytes.count)
        }
    }
}
