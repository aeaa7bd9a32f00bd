import Dispatch
import Foundation

extension FileSystem {
    /// Writes a new file from its first byte with direct I/O (`O_DIRECT`): the bytes go from
    /// this process's buffers to the disk without a copy into the page cache, on a thread of its
    /// own, so the writer fills its next piece while the last one is written. For a large file
    /// that nothing reads soon after (an inflated index, which is read back once by its check):
    /// copying it into the page cache cost more than the writing itself, and its pages then
    /// pushed out the pages of the index that answers queries.
    ///
    /// The caller takes a piece (`piece`), fills it and hands it back (`write`); pieces are
    /// `pieceSize` bytes, aligned as direct I/O needs. The last piece may be short: it is padded
    /// with zeros to the alignment and the file cut back to its size (`finish`). Durability
    /// still takes the caller's fsync.
    ///
    /// The caller must `finish` or `cancel` before it closes the file: a write still queued
    /// would otherwise go to a closed (or reused) descriptor.
    ///
    /// `@unchecked Sendable`: `pieces`, `failure` and `cancelled` are touched only under `lock`;
    /// `written` only on `queue`; `shortPiece` only by the caller's thread.
    final class DirectWriter: @unchecked Sendable {
        static let pieceSize = 4 << 20
        /// Direct I/O's alignment of memory, offsets and lengths: the largest logical block
        /// size of the disks a device has.
        static let alignment = 4096
        /// Pieces in use at once: one filled by the caller, the others queued or being written.
        static let pieceCount = 3
        #if os(Linux)
        /// `O_DIRECT` is behind `_GNU_SOURCE` in glibc's headers, which the Glibc module does not
        /// export; `__O_DIRECT`, which glibc defines for each architecture (0o40000 on x86-64,
        /// 0o200000 on AArch64), is its value.
        private static let direct = __O_DIRECT
        #endif

        private let fd: Int32
        private let path: String
        private let queue = DispatchQueue(label: "cairn.direct-write")
        private let free: DispatchSemaphore
        private let lock = NSLock()
        private let all: [UnsafeMutableRawPointer]
        private var pieces: [UnsafeMutableRawPointer]
        private var failure: StoreError?
        private var cancelled = false
        private var written: Int64 = 0
        private var shortPiece = false

        /// Turns on direct I/O for `fd`, an empty file open for writing; nil when its file
        /// system does not offer it (tmpfs on older kernels), and the caller writes through
        /// the page cache instead. The caller keeps `fd` open until this writer is gone.
        init?(fd: Int32, path: String) {
            #if os(Linux)
            let flags = fcntl(fd, F_GETFL)
            guard flags >= 0, fcntl(fd, F_SETFL, flags | Self.direct) == 0 else { return nil }
            #else
            return nil
            #endif
            self.fd = fd
            self.path = path
            all = (0..<Self.pieceCount).map { _ in
                UnsafeMutableRawPointer.allocate(byteCount: Self.pieceSize, alignment: Self.alignment)
            }
            pieces = all
            // Made at 0 and raised, not made at `pieceCount`: libdispatch traps when a semaphore
            // goes away below the value it was made with, as this one does while a piece is out.
            free = DispatchSemaphore(value: 0)
            for _ in all { free.signal() }
        }

        // Every queued write holds the writer, so this runs once none is left (perhaps on
        // `queue`'s thread, as the last one ends).
        deinit {
            for piece in all { piece.deallocate() }
        }

        /// A piece to fill, once one is free; the first write that failed, if one did.
        func piece() throws(StoreError) -> UnsafeMutableRawPointer {
            free.wait()
            lock.lock()
            defer { lock.unlock() }
            if let failure {
                free.signal()
                throw failure
            }
            return pieces.removeLast()
        }

        /// Queues `count` bytes of `piece` to be written after those queued before. Only the
        /// last piece may be shorter than `pieceSize`.
        func write(_ piece: UnsafeMutableRawPointer, count: Int) {
            precondition(!shortPiece, "a piece shorter than pieceSize must be the last")
            shortPiece = count < Self.pieceSize
            // The caller no longer touches the piece until `piece()` hands it out again.
            nonisolated(unsafe) let piece = piece
            queue.async { [self] in
                lock.lock()
                let skip = failure != nil || cancelled
                lock.unlock()
                let error = skip ? nil : store(piece, count: count)
                lock.lock()
                if failure == nil { failure = error }
                pieces.append(piece)
                lock.unlock()
                free.signal()
            }
        }

        /// Drops the writes still queued and waits for the one under way, if any: after it the
        /// file's descriptor may be closed. For a file given up part-way (a refused stream).
        func cancel() {
            lock.lock()
            cancelled = true
            lock.unlock()
            queue.sync {}
        }

        /// Waits for every queued write, cuts the file to `size` (the last piece was padded)
        /// and returns the first failure, if any.
        func finish(size: Int64) throws(StoreError) {
            queue.sync {}
            lock.lock()
            let failure = failure
            lock.unlock()
            if let failure { throw failure }
            guard ftruncate(fd, off_t(size)) == 0 else { throw FileSystem.failure("cannot truncate", path) }
        }

        /// On `queue`: writes the piece at the file's end, padded to the alignment.
        private func store(_ piece: UnsafeMutableRawPointer, count: Int) -> StoreError? {
            let padded = (count + Self.alignment - 1) / Self.alignment * Self.alignment
            if padded > count { (piece + count).initializeMemory(as: UInt8.self, repeating: 0, count: padded - count) }
            var done = 0
            while done < padded {
                let result = pwrite(fd, piece + done, padded - done, off_t(written) + off_t(done))
                if result < 0 {
                    if errno == EINTR { continue }
                    if errno == EINVAL, fallBack() { continue }
                    return FileSystem.failure("cannot write", path)
                }
                done += result
            }
            written += Int64(count)
            return nil
        }

        /// A file system that took `O_DIRECT` but refuses this alignment: write through the page
        /// cache from here on (with no write-behind: a rare case, which costs cached pages, not
        /// correctness). False when that is not what failed.
        private func fallBack() -> Bool {
            #if os(Linux)
            let flags = fcntl(fd, F_GETFL)
            guard flags >= 0, flags & Self.direct != 0 else { return false }
            return fcntl(fd, F_SETFL, flags & ~Self.direct) == 0
            #else
            return false
            #endif
        }
    }
}
