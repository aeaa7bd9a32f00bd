import CairnCore
import CairnStore

/// A full snapshot inflated into the new index file while its blob downloads: each piece is
/// hashed and inflated as it arrives, so that downloading, hashing and inflating overlap instead
/// of following one another. Nothing reads the index until the whole blob's SHA-256 has matched
/// the signed one (`finish`); the inflation refuses to write past the manifest's uncompressed
/// size, as `IndexBuilder.decompress` does, so a bomb stops there.
///
/// `@unchecked Sendable`: `receive` runs only on the transfer's thread (libcurl calls it
/// synchronously from `curl_easy_perform`); `digest` and `finish` run after the transfer, which
/// their caller awaited.
final class SnapshotStream: DownloadTap, @unchecked Sendable {
    private var hasher = ContentID.Hasher()
    private let inflater: Zlib.FileInflater
    /// Body bytes seen.
    private(set) var received: Int64 = 0
    /// The inflation's first failure; the bytes are still hashed (a corrupt blob is then refused
    /// for its hash, not for its inflation).
    private var failure: StoreError?

    init(index: String, uncompressedSize: Int) throws(SyncError) {
        do { inflater = try Zlib.FileInflater(creating: index, size: uncompressedSize) } catch {
            throw IndexBuilder.snapshotFailure(error)
        }
    }

    func receive(_ bytes: UnsafeRawBufferPointer) {
        hasher.update(bytes)
        received += Int64(bytes.count)
        guard failure == nil else { return }
        do { try inflater.feed(bytes) } catch { failure = error }
    }

    /// The SHA-256 of the bytes seen.
    var digest: ContentID { hasher.finalize() }

    /// Once the digest matched: whether the stream inflated to exactly the stated size (the file
    /// is then written out, its writeback started, not fsynced).
    func finish() throws(SyncError) {
        do throws(StoreError) {
            if let failure { throw failure }
            try inflater.finish(durable: false)
        } catch {
            throw IndexBuilder.snapshotFailure(error)
        }
    }
}
