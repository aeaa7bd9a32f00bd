import CairnCore
import Foundation
import Hummingbird
import Synchronization

/// Small repository files (manifests, version manifests, public keys), held in memory with the
/// SHA-256 of their bytes, and re-read only when `stat` shows the file changed. Reading them is
/// a short blocking read of a few kilobytes; blobs never go through here. A file holding a
/// private signing key is not a document: it is answered as absent.
final class DocumentCache: Sendable {
    struct Document: Sendable {
        var bytes: ByteBuffer
        /// Lowercase hex SHA-256 of `bytes`.
        var sha256: String
    }

    /// Files larger than this are not documents; serving them as such is refused.
    static let maximumSize = 8 << 20
    private static let maximumEntries = 4096

    private let entries = Mutex<[String: (identity: [Int], document: Document)]>([:])

    init() {}

    /// The document at `file`, from memory when its identity is unchanged.
    func document(_ file: RepositoryRoot.Resolved) -> Document? {
        if let hit = entries.withLock({ $0[file.path] }), hit.identity == file.identity { return hit.document }
        guard file.size <= Self.maximumSize, let data = FileManager.default.contents(atPath: file.path) else { return nil }
        // Start-up refuses a root holding a private key; one copied in later (`cp keys/* repo/keys/`)
        // is never served either.
        guard !data.starts(with: PublisherKey.fileTag.utf8) else { return nil }
        let digest = ContentID(hashing: data).hex
        let document = Document(bytes: ByteBuffer(bytes: data), sha256: digest)
        // The bytes read may be newer than the identity taken before reading: then the next
        // request sees a changed identity and reads again, so nothing stale is kept.
        entries.withLock {
            if $0.count >= Self.maximumEntries { $0.removeAll() }
            $0[file.path] = (file.identity, document)
        }
        return document
    }
}
