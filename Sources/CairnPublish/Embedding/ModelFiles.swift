public import CairnCore
public import CairnEmbedding
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
            guard let data = FileManager.default.contents(atPath: path) else {
                throw PublishError(.model, "cannot read the model file \(path)")
            }
            files.append((name, Array(data)))
        }
        self.id = id
        self.dimension = dimension
        self.maxTokens = maxTokens
        self.files = files
        weightsHash = ContentID(hashing: files[0].1)
        cacheKey = "\(id)@\(weightsHash.hex)"
    }

    /// SHA-256 of `model.safetensors`, computed once (hashing ~90 MB per cache lookup made a
    /// publish of a few thousand chunks take many minutes before any embedding started).
    public let weightsHash: ContentID

    /// The embedding cache's model key: the id and the weights' hash, so a retrained model
    /// under the same id never reuses stale vectors.
    public let cacheKey: String

    /// The manifest's model entry.
    public var manifestModel: Manifest.Model {
        Manifest.Model(id: id, dimension: dimension, maxTokens: maxTokens,
                       files: files.map { Manifest.ModelFile(name: $0.name, sha256: ContentID(hashing: $0.bytes), size: $0.bytes.count) })
    }
}
