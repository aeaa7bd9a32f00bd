import CairnCore
import CairnEmbedding

/// Finds each chunk's vector: from an earlier version's snapshot embedded with the same model,
/// else from the embedding cache, else from the model — and counts which.
struct VectorSource {
    let model: PublishedModel
    let embedder: SentenceEmbedder
    let cache: EmbeddingCache?
    let batchSize: Int
    /// Vectors of earlier versions by the SHA-256 of the text they embed.
    private var known: [ContentID: [Float]] = [:]
    private(set) var embedded = 0
    private(set) var reusedFromSnapshot = 0
    private(set) var reusedFromCache = 0

    init(model: PublishedModel, embedder: SentenceEmbedder, cache: EmbeddingCache?, bases: [PublishedVersion], batchSize: Int) {
        self.model = model
        self.embedder = embedder
        self.cache = cache
        self.batchSize = batchSize
        let weights = Manifest.ModelFile.allowedNames[0]
        for base in bases.reversed() where base.manifest.model.id == model.id && base.manifest.dimension == model.dimension
            && base.manifest.model.files.first(where: { $0.name == weights })?.sha256 == model.weightsHash {
            for record in base.records { known[Self.textHash(record.chunk)] = record.vector }
        }
    }

    static func textHash(_ chunk: Chunk) -> ContentID { ContentID(hashing: Array(chunk.embeddingText.utf8)) }

    /// Every chunk with its vector, in the order given.
    mutating func vectors(for chunks: [Chunk], progress: (PublishProgress) -> Void) throws(PublishError) -> [ChunkRecord] {
        var vectors = [[Float]?](repeating: nil, count: chunks.count)
        var pending: [ContentID: [Int]] = [:]
        var order: [ContentID] = []
        for (index, chunk) in chunks.enumerated() {
            let hash = Self.textHash(chunk)
            if let vector = known[hash] {
                vectors[index] = vector
                reusedFromSnapshot += 1
            } else if let vector = try cache?.vector(modelKey: model.cacheKey, textHash: hash, dimension: model.dimension) {
                vectors[index] = vector
                reusedFromCache += 1
            } else {
                if pending[hash] == nil { order.append(hash) }
                pending[hash, default: []].append(index)
            }
        }
        let total = order.count
        progress(PublishProgress(done: 0, total: total))
        var done = 0
        while done < total {
            let batch = Array(order[done..<min(done + batchSize, total)])
            let results = embedder.embed(batch.map { chunks[pending[$0]![0]].embeddingText })
            guard results.allSatisfy({ $0.count == model.dimension && $0.allSatisfy(\.isFinite) }) else {
                throw PublishError(.model, "the model produced a vector that is not \(model.dimension) finite values")
            }
            for (hash, vector) in zip(batch, results) {
                for index in pending[hash]! { vectors[index] = vector }
                embedded += pending[hash]!.count
            }
            try cache?.store(modelKey: model.cacheKey, Array(zip(batch, results)).map { (textHash: $0.0, vector: $0.1) })
            done += batch.count
            progress(PublishProgress(done: done, total: total))
        }
        return zip(chunks, vectors).map { ChunkRecord(chunk: $0.0, vector: $0.1!) }
    }
}
