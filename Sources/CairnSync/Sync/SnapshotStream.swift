import CairnCore
import CairnStore
import CairnThreads
import Foundation

/// A full snapshot inflated into the new index file while its blob downloads, so that
/// downloading, hashing and inflating overlap instead of following one another: the transfer's
/// thread hashes each piece as it arrives and queues a copy; a second install thread inflates
/// the queue into the file. Nothing reads the index until the whole blob's SHA-256 has matched
/// the signed one (`finish`); the inflation refuses to write past the manifest's uncompressed
/// size, as `Zlib.decompressFile` does, so a bomb stops there. At most `queueLimit` bytes wait
/// in the queue: a faster network waits for the inflation (TCP holds the rest back).
///
/// `@unchecked Sendable`: `hasher` and `received` are touched only by the transfer's thread
/// (libcurl calls `receive` synchronously) and, after the transfer, by its awaiting caller; the
/// inflater only by the inflating thread until `finish` has joined it; the queue and flags only
/// under `condition`'s lock.
final class SnapshotStream: DownloadTap, @unchecked Sendable {
    static let queueLimit = 4 << 20

    private var hasher = ContentID.Hasher()
    private let inflater: Zlib.FileInflater
    /// Body bytes seen.
    private(set) var received: Int64 = 0

    private let condition = NSCondition()
    private var queue: [[UInt8]] = []
    private var queuedBytes = 0
    private var inputEnded = false
    private var inflating = true
    /// The inflation's first failure; the bytes are still hashed (a corrupt blob is then refused
    /// for its hash, not for its inflation).
    private var failure: StoreError?

    /// `bypassingCache`: the index is written around the page cache (a large one: its check
    /// reads it back once, and its pages would push out the serving index's).
    init(index: String, uncompressedSize: Int, bypassingCache: Bool) throws(SyncError) {
        do { inflater = try Zlib.FileInflater(creating: index, size: uncompressedSize, bypassingCache: bypassingCache) } catch {
            throw IndexBuilder.snapshotFailure(error)
        }
        BackgroundWork.start { [self] in inflateQueue() }
    }

    func receive(_ bytes: UnsafeRawBufferPointer) {
        hasher.update(bytes)
        received += Int64(bytes.count)
        condition.lock()
        while queuedBytes >= Self.queueLimit, failure == nil { condition.wait() }
        if failure == nil {
            queue.append(Array(bytes))
            queuedBytes += bytes.count
            condition.broadcast()
        }
        condition.unlock()
    }

    /// The SHA-256 of the bytes seen.
    var digest: ContentID { hasher.finalize() }

    /// Ends the input and waits until the inflating thread has stopped; call once the transfer
    /// is over, whatever its outcome.
    func endInput() {
        condition.lock()
        inputEnded = true
        condition.broadcast()
        while inflating { condition.wait() }
        condition.unlock()
    }

    /// After `endInput`, once the digest matched: whether the stream inflated to exactly the
    /// stated size (the file is then written out, its writeback started, not fsynced).
    func finish() throws(SyncError) {
        do throws(StoreError) {
            if let failure { throw failure }
            try inflater.finish(durable: false)
        } catch {
            throw IndexBuilder.snapshotFailure(error)
        }
    }

    /// The inflating thread: feeds the queue to the inflater until the input ends; after a
    /// failure it stops (the transfer's thread then stops queueing).
    private func inflateQueue() {
        condition.lock()
        while true {
            while queue.isEmpty, !inputEnded { condition.wait() }
            if queue.isEmpty || failure != nil { break }
            let pieces = queue
            queue.removeAll(keepingCapacity: true)
            queuedBytes = 0
            condition.broadcast()
            condition.unlock()
            var error: StoreError?
            for piece in pieces where error == nil {
                piece.withUnsafeBytes { bytes in
                    do throws(StoreError) { try inflater.feed(bytes) } catch let caught { error = caught }
                }
            }
            condition.lock()
            if let error { failure = error }
        }
        queue.removeAll()
        inflating = false
        condition.broadcast()
        condition.unlock()
    }
}
