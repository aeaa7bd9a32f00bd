import Foundation

extension Zlib {
    /// Inflates `input` into a new file at `output` (created exclusively), refusing to write past
    /// `size` bytes (a decompression bomb stops there) or to produce fewer.
    /// - Parameter durable: fsync the file before returning; false for a caller that fsyncs it
    ///   itself (beside its checks of the file) before anything depends on it.
    public static func decompress(_ input: [UInt8], toNewFile output: String, size: Int, durable: Bool = true) throws(StoreError) {
        let fd = open(output, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw StoreError(.io, "cannot create \(output): \(String(cString: strerror(errno)))", errno: errno) }
        defer { close(fd) }
        var produced = 0
        try decompress(input, limit: size) { (chunk) throws(StoreError) in
            var done = 0
            while done < chunk.count {
                let result = write(fd, chunk.baseAddress! + done, chunk.count - done)
                if result < 0 {
                    if errno == EINTR { continue }
                    throw StoreError([ENOSPC, EFBIG, EDQUOT].contains(errno) ? .diskFull : .io,
                                     "cannot write \(output): \(String(cString: strerror(errno)))", errno: errno)
                }
                done += result
            }
            produced += chunk.count
        }
        guard produced == size else {
            throw StoreError(.corruptStream, "zlib stream inflates to \(produced) bytes, not the stated \(size)")
        }
        guard !durable || fsync(fd) == 0 else { throw StoreError(.io, "cannot fsync \(output)", errno: errno) }
    }
}
