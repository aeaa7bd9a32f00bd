import CairnCore
public import CairnEmbedding
public import CairnIndex

/// One installed version, ready to answer: its open index, and the model that embeds queries
/// for it (nil: lexical only). Immutable; a query holds a reference for its whole duration, so
/// the version stays open until the last query on it ends, even after a swap.
public final class ServingVersion: Sendable {
    public let version: Int
    /// The state root, hex.
    public let stateRoot: String
    public let index: SearchIndex
    /// Embeds queries with the model that embedded the corpus; nil when the version has no
    /// usable model (every answer is then lexical only and says so).
    public let embedder: SentenceEmbedder?
    /// The signed manifest bytes as downloaded (empty when the folder has none).
    public let manifest: [UInt8]
    /// The version folder it was loaded from (informational).
    public let directory: String?
    /// The resolved model folder the embedder came from, to reuse it across versions.
    public let modelDirectory: String?

    public init(index: SearchIndex, embedder: SentenceEmbedder?, manifest: [UInt8] = [],
                directory: String? = nil, modelDirectory: String? = nil) {
        self.version = index.meta.version
        self.stateRoot = index.meta.stateRoot.hex
        self.index = index
        self.embedder = embedder
        self.manifest = manifest
        self.directory = directory
        self.modelDirectory = modelDirectory
    }

    /// Whether queries are embedded (dense and hybrid retrieval possible).
    public var denseAvailable: Bool { embedder != nil }
}
