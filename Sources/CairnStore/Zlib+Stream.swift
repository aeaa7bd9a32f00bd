public import CairnCore
import CZlib
import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension Zlib {
    /// What a file compressed: the SHA-256 and size of the compressed bytes, and the input's size.
    public struct Compressed: Sendable, Equatable {
        public let sha256: ContentID
        public let size: Int
        public let inputSize: Int
    }

    /// Compresses the file at `input` into a new file at `output` (created exclusively, not
    /// fsynced) at `level`, a megabyte at a time, hashing the compressed bytes as they are
    /// written: memory stays flat whatever the file's size. The bytes are those `compress`
    /// gives the whole file at the same level (zlib's output does not depend on how its input is
    /// cut), so a rebuilt snapshot blob matches a published one. Stops with `.sizeLimitExceeded`
    /// once the output passes `limit` bytes (a delta that would not be smaller than its snapshot).
    /// `stopping` is asked before each megabyte (true ends it: the output is
    /// removed and `ECANCELED` thrown): a level-9 pass over gigabytes takes minutes.
    public static func compressFile(_ input: String, to output: String, level: Int32 = 6,
                                    limit: Int = .max, stopping: () -> Bool = { false }) throws(StoreError) -> Compressed {
        let source = open(input, O_RDONLY | O_CLOEXEC)
        guard source >= 0 else { throw FileSystem.failure("cannot open", input) }
        defer { close(source) }
        let destination = open(output, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard destination >= 0 else { throw FileSystem.failure("cannot create", output) }
        defer { close(destination) }
        var stream = z_stream()
        guard cairn_deflateInit(&stream, level) == Z_OK else { throw StoreError(.io, "zlib: cannot initialise compression") }
        defer { deflateEnd(&stream) }
        var hasher = ContentID.Hasher()
        let inBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        let outBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { inBuffer.deallocate(); outBuffer.deallocate() }
        var (read, written, finished) = (0, 0, false)
        do throws(StoreError) {
            while !finished {
                if stopping() { throw FileSystem.failure("stopped compressing into", output, ECANCELED) }
                let count = Glibc.read(source, inBuffer.baseAddress, inBuffer.count)
                if count < 0 {
                    if errno == EINTR { continue }
                    throw FileSystem.failure("cannot read", input)
                }
                read += count
                let flush = count == 0 ? Z_FINISH : Z_NO_FLUSH
                var status = Z_OK
                stream.next_in = inBuffer.baseAddress!.assumingMemoryBound(to: Bytef.self)
                stream.avail_in = uInt(count)
                repeat {
                    stream.next_out = outBuffer.baseAddress!.assumingMemoryBound(to: Bytef.self)
                    stream.avail_out = uInt(outBuffer.count)
                    status = deflate(&stream, flush)
                    guard status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR else {
                        throw StoreError(.io, "zlib: compression failed (\(status))")
                    }
                    let piece = UnsafeRawBufferPointer(rebasing: outBuffer[0..<(outBuffer.count - Int(stream.avail_out))])
                    hasher.update(piece)
                    try FileSystem.writeAll(destination, piece, path: output)
                    written += piece.count
                    guard written <= limit else {
                        throw StoreError(.sizeLimitExceeded, "the compressed output passes \(limit) bytes")
                    }
                } while stream.avail_out == 0 || (flush == Z_FINISH && status != Z_STREAM_END)
                finished = status == Z_STREAM_END
            }
        } catch {
            unlink(output)
            throw error
        }
        return Compressed(sha256: hasher.finalize(), size: written, inputSize: read)
    }

    /// Inflates the blob file at `input`, whose SHA-256 must be `sha256`, into a new file at
    /// `output` of exactly `size` bytes (not fsynced), a megabyte at a time, so that memory does
    /// not grow with the blob; `bypassingCache` keeps the output out of the page cache
    /// (`FileInflater`). A blob that does not match its hash, or does not inflate to
    /// `size`, is refused and `output` removed.
    public static func decompressFile(_ input: String, sha256: ContentID, to output: String, size: Int,
                                      bypassingCache: Bool = false) throws(StoreError) {
        let source = open(input, O_RDONLY | O_CLOEXEC)
        guard source >= 0 else { throw FileSystem.failure("cannot open", input) }
        defer { close(source) }
        let inflater = try FileInflater(creating: output, size: size, bypassingCache: bypassingCache)
        var hasher = ContentID.Hasher()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        // A stream that fails to inflate is reported as the hash mismatch it then is (the blob
        // is hashed to its end first); only a blob that matches its hash is ever judged by zlib.
        var inflateFailure: StoreError?
        do throws(StoreError) {
            while true {
                let count = Glibc.read(source, buffer.baseAddress, buffer.count)
                if count < 0 {
                    if errno == EINTR { continue }
                    throw FileSystem.failure("cannot read", input)
                }
                if count == 0 { break }
                let piece = UnsafeRawBufferPointer(rebasing: buffer[0..<count])
                hasher.update(piece)
                if inflateFailure == nil {
                    do { try inflater.feed(piece) } catch { inflateFailure = error }
                }
            }
            guard hasher.finalize() == sha256 else {
                throw StoreError(.hashMismatch, "blob \(sha256.hex.prefix(12))… does not match its SHA-256")
            }
            if let inflateFailure { throw inflateFailure }
            try inflater.finish(durable: false)
        } catch {
            unlink(output)
            throw error
        }
    }
}

extension FileSystem {
    /// The SHA-256 and size of the file at `path`, read a megabyte at a time. `fromDisk`: the
    /// file is first flushed (`fsync`) and its pages dropped from the page cache
    /// (`POSIX_FADV_DONTNEED`), so the bytes hashed are the ones the disk gives back, not the
    /// ones the cache still holds from the writes.
    /// `stopping` is asked before each megabyte (true ends it with `ECANCELED`).
    public static func sha256(of path: String, fromDisk: Bool = false,
                              stopping: () -> Bool = { false }) throws(StoreError) -> (id: ContentID, size: Int) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw failure("cannot open", path) }
        defer { close(fd) }
        if fromDisk {
            guard fsync(fd) == 0 else { throw failure("cannot flush", path) }
            _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var hasher = ContentID.Hasher()
        var size = 0
        while true {
            if stopping() { throw failure("stopped reading", path, ECANCELED) }
            let count = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw failure("cannot read", path)
            }
            if count == 0 { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            size += count
        }
        return (hasher.finalize(), size)
    }

    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws(StoreError) {
        var written = 0
        while written < bytes.count {
            let result = Glibc.write(fd, bytes.baseAddress! + written, bytes.count - written)
            if result < 0 {
                if errno == EINTR { continue }
                throw failure("cannot write", path)
            }
            written += result
        }
    }
}

extension BlobStore {
    /// Stores the file at `path`, whose SHA-256 is `id`, as a blob (an in-kernel copy, fsynced,
    /// renamed into place, its folder fsynced); a blob already present at the file's size is not
    /// rewritten. The caller computed `id` over the very bytes of the file (`Zlib.compressFile`).
    /// `stopping` is asked during the copy (true ends it: the copy is removed and an error thrown).
    @discardableResult
    public func put(file path: String, id: ContentID, stopping: (() -> Bool)? = nil) throws(StoreError) -> Stored {
        var info = stat()
        guard stat(path, &info) == 0 else { throw FileSystem.failure("cannot read", path) }
        let found = finding(id, size: Int64(info.st_size))
        if found == .present { return found }
        let folder = root + "/blobs/sha256/\(id.hex.prefix(2))"
        try FileSystem.makeDirectory(folder)
        let temporary = folder + "/.tmp-\(UUID().uuidString)"
        try FileSystem.copyFile(from: path, to: temporary, stopping: stopping)
        let fd = open(temporary, O_RDONLY | O_CLOEXEC)
        guard fd >= 0, fsync(fd) == 0 else {
            let error = FileSystem.failure("cannot fsync", temporary)
            if fd >= 0 { close(fd) }
            unlink(temporary)
            throw error
        }
        close(fd)
        guard rename(temporary, self.path(of: id)) == 0 else {
            let error = FileSystem.failure("cannot rename into", self.path(of: id))
            unlink(temporary)
            throw error
        }
        try FileSystem.syncDirectory(folder)
        return found
    }
}
