import CairnCore
import CairnEmbedding

/// Finds each chunk's vector: from a verified `--vectors` file when one is given, else from an
/// earlier version's snapshot embedded with the same model, else from the embedding cache, else
/// from the model — and counts which.
struct VectorSource {
    let model: PublishedModel
    let embedder: SentenceEmbedder
    let cache: EmbeddingCache?
    let batchSize: Int
    /// Vectors computed elsewhere, already checked (`SuppliedVectors.verify`).
    var supplied: SuppliedVectors?
    /// Vectors of earlier versions by the SHA-256 of the text they embed.
    private var known: [ContentID: [Float]] = [:]
    private(set) var embedded = 0
    private(set) var reusedFromSnapshot = 0
    private(set) var reusedFromCache = 0
    private(set) var fromFile = 0

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
        if let supplied { return try vectors(for: chunks, from: supplied) }
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

    /// Every chunk with row i of `file`, scaled to unit length (as the model's are), each row
    /// checked finite and non-zero; the embedding cache is filled from them.
    private mutating func vectors(for chunks: [Chunk], from file: SuppliedVectors) throws(PublishError) -> [ChunkRecord] {
        var records: [ChunkRecord] = []
        records.reserveCapacity(chunks.count)
        var pending: [(textHash: ContentID, vector: [Float])] = []
        for (index, chunk) in chunks.enumerated() {
            var vector = file.row(index)
            let norm = vector.reduce(Float(0)) { $0 + $1 * $1 }.squareRoot()
            guard norm.isFinite, norm > 0 else {
                throw PublishError(.badInput, "\(file.path): row \(index) (chunk \"\(chunk.id)\") is zero or not finite")
            }
            for position in vector.indices { vector[position] /= norm }
            records.append(ChunkRecord(chunk: chunk, vector: vector))
            pending.append((Self.textHash(chunk), vector))
            if pending.count == 1024 || index == chunks.count - 1 {
                try cache?.store(modelKey: model.cacheKey, pending)
                pending.removeAll(keepingCapacity: true)
            }
        }
        fromFile = chunks.count
        return records
    }
}
