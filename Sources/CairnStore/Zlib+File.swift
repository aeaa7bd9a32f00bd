import CZlib
import Foundation

extension Zlib {
    /// Inflates `input` into a new file at `output` (created exclusively), refusing to write past
    /// `size` bytes (a decompression bomb stops there) or to produce fewer.
    /// - Parameter durable: fsync the file before returning; false for a caller that fsyncs it
    ///   itself (beside its checks of the file) before anything depends on it.
    public static func decompress(_ input: [UInt8], toNewFile output: String, size: Int, durable: Bool = true) throws(StoreError) {
        let inflater = try FileInflater(creating: output, size: size)
        var failure: StoreError?
        input.withUnsafeBytes { bytes in
            do throws(StoreError) { try inflater.feed(bytes) } catch { failure = error }
        }
        if let failure { throw failure }
        try inflater.finish(durable: durable)
    }

    /// Inflates one zlib stream, given in pieces as it arrives (a download), into a new file
    /// (created exclusively): it refuses to write past `size` bytes (a decompression bomb stops
    /// there), and `finish` refuses a stream that is truncated, has trailing bytes or inflates to
    /// fewer bytes. Writes in large pieces. `bypassingCache` keeps the file out of the page cache:
    /// direct I/O on a thread of its own (`FileSystem.DirectWriter`), or where the file system
    /// does not offer it, pages dropped behind the writer (`FileSystem.WriteBehind`). Not
    /// thread-safe: one caller feeds it.
    public final class FileInflater {
        private let stream: UnsafeMutablePointer<z_stream>
        private let fd: Int32
        private let path: String
        private let size: Int
        /// The piece being filled: the direct writer's, or a buffer of this inflater's own.
        private var buffer: UnsafeMutableRawPointer
        private let capacity: Int
        private let direct: FileSystem.DirectWriter?
        private var behind: FileSystem.WriteBehind?
        private var pending = 0
        private var written = 0
        private var ended = false

        /// Bytes written out (and held in the buffer) so far.
        public var produced: Int { written + pending }

        /// Whether the file is written with direct I/O.
        public var isDirect: Bool { direct != nil }

        public convenience init(creating path: String, size: Int, bypassingCache: Bool = false) throws(StoreError) {
            try self.init(creating: path, size: size, directIO: bypassingCache, behind: bypassingCache ? FileSystem.WriteBehind() : nil)
        }

        /// `directIO`: direct I/O where the file system offers it; `behind` where it does not.
        init(creating path: String, size: Int, directIO: Bool, behind: FileSystem.WriteBehind?) throws(StoreError) {
            let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
            stream.initialize(to: z_stream())
            guard cairn_inflateInit(stream) == Z_OK else {
                stream.deallocate()
                throw StoreError(.io, "zlib: cannot initialise decompression")
            }
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            guard fd >= 0 else {
                let error = StoreError(.io, "cannot create \(path): \(String(cString: strerror(errno)))", errno: errno)
                inflateEnd(stream)
                stream.deallocate()
                throw error
            }
            self.stream = stream
            self.fd = fd
            self.path = path
            self.size = size
            if directIO, let writer = FileSystem.DirectWriter(fd: fd, path: path) {
                direct = writer
                // The first piece is free: taking it neither waits nor fails.
                buffer = try! writer.piece()
                capacity = FileSystem.DirectWriter.pieceSize
            } else {
                direct = nil
                self.behind = behind
                capacity = 1 << 20
                buffer = .allocate(byteCount: capacity, alignment: 16)
            }
        }

        deinit {
            inflateEnd(stream)
            stream.deallocate()
            if direct == nil { buffer.deallocate() }
            // The writer's pieces are its own. Writes still queued (a stream refused part-way)
            // are dropped before the file is closed.
            direct?.cancel()
            close(fd)
        }

        /// Inflates the next piece of the stream.
        public func feed(_ input: UnsafeRawBufferPointer) throws(StoreError) {
            guard !input.isEmpty else { return }
            guard !ended else { throw StoreError(.corruptStream, "zlib stream has trailing bytes") }
            stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress!.assumingMemoryBound(to: UInt8.self))
            stream.pointee.avail_in = uInt(input.count)
            while stream.pointee.avail_in > 0, !ended {
                let room = capacity - pending
                let before = stream.pointee.avail_in
                stream.pointee.next_out = (buffer + pending).assumingMemoryBound(to: UInt8.self)
                stream.pointee.avail_out = uInt(room)
                let status = inflate(stream, Z_NO_FLUSH)
                let count = room - Int(stream.pointee.avail_out)
                switch status {
                case Z_OK: break
                case Z_BUF_ERROR where count > 0 || stream.pointee.avail_in < before: break
                case Z_STREAM_END: ended = true
                default: throw StoreError(.corruptStream, "zlib stream is corrupt (\(status))")
                }
                guard produced + count <= size else {
                    throw StoreError(.sizeLimitExceeded, "zlib stream inflates past its stated size of \(size) bytes")
                }
                pending += count
                if pending == capacity { try flush(last: false) }
            }
            if ended, stream.pointee.avail_in > 0 {
                throw StoreError(.corruptStream, "zlib stream has \(stream.pointee.avail_in) trailing bytes")
            }
        }

        /// Writes what is buffered and checks that the stream ended at exactly `size` bytes;
        /// `durable` fsyncs the file, else its writeback is only started (`FileSystem.startWriteback`).
        public func finish(durable: Bool) throws(StoreError) {
            try flush(last: true)
            guard ended else { throw StoreError(.corruptStream, "zlib stream is truncated") }
            guard written == size else {
                throw StoreError(.corruptStream, "zlib stream inflates to \(written) bytes, not the stated \(size)")
            }
            if durable {
                guard fsync(fd) == 0 else { throw StoreError(.io, "cannot fsync \(path)", errno: errno) }
            } else {
                FileSystem.startWriteback(fd)
            }
        }

        private func flush(last: Bool) throws(StoreError) {
            if let direct {
                if pending > 0 || last {
                    direct.write(buffer, count: pending)
                    written += pending
                    pending = 0
                }
                if last { try direct.finish(size: Int64(written)) } else { buffer = try direct.piece() }
                return
            }
            try FileSystem.writeAll(fd, UnsafeRawBufferPointer(start: buffer, count: pending), path: path)
            written += pending
            pending = 0
            if let code = behind?.wrote(upTo: Int64(written), fd: fd), code != 0 { throw FileSystem.failure("cannot write", path, code) }
        }
    }
}
