public import CairnCore
public import CairnEmbedding
import CairnStore
import Foundation

/// The embedding model as the repository names it: its id, dimension, token window and the
/// three files (read from the embedder's folder) that travel as blobs.
public struct PublishedModel: Sendable {
    /// The id every Cairn repository uses for all-MiniLM-L6-v2.
    public static let defaultID = "sentence-transformers/all-MiniLM-L6-v2"

    public let id: String
    public let dimension: Int
    public let maxTokens: Int
    /// The files' bytes, in `Manifest.ModelFile.allowedNames` order.
    public let files: [(name: String, bytes: [UInt8])]

    /// Reads the model files from `directory`.
    public init(directory: String, id: String = PublishedModel.defaultID, dimension: Int,
                maxTokens: Int = SentenceEmbedder.defaultMaximumTokens) throws(PublishError) {
        var files: [(String, [UInt8])] = []
        for name in Manifest.ModelFile.allowedNames {
            let path = (directory as NSString).appendingPathComponent(name)
            do { files.append((name, try FileSystem.read(path))) } catch {
                throw PublishError(.model, "cannot read the model file \(path): \(error.reason)")
            }
        }
        self.id = id
        self.dimension = dimension
        self.maxTokens = maxTokens
        self.files = files
        weightsHash = ContentID(hashing: files[0].1)
        // The vocabulary and the token limit too: the same weights embed a text differently
        // under another tokenization (since 2026-12-06; a cache filled before is not used again,
        // once). Not config.json's bytes: with the weights unchanged, what it says that matters
        // is fixed by their shapes, and a file only reformatted must not cost a re-embedding of
        // the whole knowledge base (and a delta of every row).
        vocabularyHash = ContentID(hashing: files[1].1)
        cacheKey = "\(id)@\(weightsHash.hex)/\(ContentID(hashing: Array("\(vocabularyHash.hex) \(maxTokens)".utf8)).hex.prefix(16))"
    }

    /// SHA-256 of `model.safetensors`, computed once (hashing ~90 MB per cache lookup made a
    /// publish of a few thousand chunks take many minutes before any embedding started).
    public let weightsHash: ContentID
    /// SHA-256 of `vocab.txt`.
    public let vocabularyHash: ContentID

    /// The embedding cache's model key: the id, the weights' hash and a hash of the other files
    /// and the token limit, so a retrained model or a changed tokenizer under the same id never
    /// reuses stale vectors.
    public let cacheKey: String

    /// The manifest's model entry.
    public var manifestModel: Manifest.Model {
        Manifest.Model(id: id, dimension: dimension, maxTokens: maxTokens,
                       files: files.map { Manifest.ModelFile(name: $0.name, sha256: ContentID(hashing: $0.bytes), size: $0.bytes.count) })
    }
}
