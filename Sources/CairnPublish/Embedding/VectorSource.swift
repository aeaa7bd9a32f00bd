import CairnCore
import CairnEmbedding
import CairnIndex
import Foundation

/// Finds each chunk's vector, a batch of chunks at a time: from a verified `--vectors` file when
/// one is given, else from the newest earlier version's snapshot embedded with the same model
/// and signed by a key that vouches for it (`PublishedVersion.vouched`)
/// (by the text the vector embeds, looked up in an index of that snapshot's rows built once in
/// the scratch folder), else from the embedding cache, else from the model — and counts which.
/// Holds no vector beyond the batch's.
struct VectorSource {
    let model: PublishedModel
    let embedder: SentenceEmbedder
    let cache: EmbeddingCache?
    /// Vectors computed elsewhere, one row per chunk in reading order (checked by a sample).
    var supplied: SuppliedVectors?
    /// Where the rows of `supplied` are gathered for the embedding cache: a scratch cache,
    /// merged into `cache` only once the version is written (a publish refused later, by a
    /// canary or a source changed under it, must not leave rows a sample did not check in the
    /// cache, where the next publish without --vectors would take them).
    var gathered: EmbeddingCache?
    private let earlier: EarlierVectors?
    private(set) var embedded = 0
    private(set) var reusedFromSnapshot = 0
    private(set) var reusedFromCache = 0
    private(set) var fromFile = 0
    /// Rows of a vectors file further than the check allows from the earlier version's vector
    /// for the same text (taken as given).
    private(set) var disagreeing = 0

    init(model: PublishedModel, embedder: SentenceEmbedder, cache: EmbeddingCache?, bases: [PublishedVersion],
         scratch: String) throws(PublishError) {
        self.model = model
        self.embedder = embedder
        self.cache = cache
        // The same model in what decides a vector: the weights, the vocabulary and the token
        // limit (a vocabulary fixed or changed under the same weights tokenizes the same text
        // differently; its vectors would not match the queries'), as the cache key (ModelFiles).
        let (weights, vocabulary) = (Manifest.ModelFile.allowedNames[0], Manifest.ModelFile.allowedNames[1])
        let newest = bases.first { base in
            let earlier = base.manifest.model
            func hash(_ name: String) -> ContentID? { earlier.files.first { $0.name == name }?.sha256 }
            return base.vouched && earlier.id == model.id && base.manifest.dimension == model.dimension
                && earlier.maxTokens == model.maxTokens && hash(weights) == model.weightsHash && hash(vocabulary) == model.vocabularyHash
        }
        if let newest {
            earlier = try EarlierVectors(snapshot: newest.path, dimension: model.dimension, scratch: scratch)
        } else {
            earlier = nil
        }
    }

    static func textHash(_ chunk: Chunk) -> ContentID { ContentID(hashing: Array(chunk.embeddingText.utf8)) }

    /// The vectors of `batch` (each chunk with its row in reading order), in order.
    mutating func vectors(for batch: [(row: Int, chunk: Chunk)]) throws(PublishError) -> [[Float]] {
        if let supplied { return try vectors(for: batch, from: supplied) }
        var vectors = [[Float]?](repeating: nil, count: batch.count)
        var missing: [ContentID: [Int]] = [:]
        var order: [ContentID] = []
        for (index, item) in batch.enumerated() {
            let hash = Self.textHash(item.chunk)
            if let vector = try earlier?.vector(textHash: hash) {
                vectors[index] = vector
                reusedFromSnapshot += 1
            } else if let vector = try cache?.vector(modelKey: model.cacheKey, textHash: hash, dimension: model.dimension) {
                vectors[index] = vector
                reusedFromCache += 1
            } else {
                if missing[hash] == nil { order.append(hash) }
                missing[hash, default: []].append(index)
            }
        }
        guard !order.isEmpty else { return vectors.map { $0! } }
        let results = embedder.embed(order.map { batch[missing[$0]![0]].chunk.embeddingText })
        guard results.allSatisfy({ $0.count == model.dimension && $0.allSatisfy(\.isFinite) }) else {
            throw PublishError(.model, "the model produced a vector that is not \(model.dimension) finite values")
        }
        for (hash, vector) in zip(order, results) {
            for index in missing[hash]! { vectors[index] = vector }
            embedded += missing[hash]!.count
        }
        try cache?.store(modelKey: model.cacheKey, Array(zip(order, results)).map { (textHash: $0.0, vector: $0.1) })
        return vectors.map { $0! }
    }

    /// Row `row` of `file` for each chunk, scaled to unit length (as the model's are), each
    /// checked finite and non-zero; `gathered` is filled from them. A chunk the earlier
    /// version holds with the same text keeps that version's vector when the file's row agrees
    /// with it (cosine at least `SuppliedVectors.minimumCosine`): vectors computed again
    /// elsewhere differ in their last bits (another batch, another GPU), and a changed vector is
    /// an upsert, so without this every row would be in the delta. A row that disagrees is taken
    /// as given and counted (`disagreeing`).
    private mutating func vectors(for batch: [(row: Int, chunk: Chunk)], from file: SuppliedVectors) throws(PublishError) -> [[Float]] {
        var vectors: [[Float]] = []
        var pending: [(textHash: ContentID, vector: [Float])] = []
        for (row, chunk) in batch {
            guard row < file.rows else {
                throw PublishError(.badInput, "\(file.path): \(file.rows) rows, but the source has more chunks; row i must be the i-th chunk of the source in reading order")
            }
            var vector = file.row(row)
            let norm = vector.reduce(Float(0)) { $0 + $1 * $1 }.squareRoot()
            guard norm.isFinite, norm > 0 else {
                throw PublishError(.badInput, "\(file.path): row \(row) (chunk \"\(chunk.id)\") is zero or not finite")
            }
            for position in vector.indices { vector[position] /= norm }
            if let kept = try earlier?.vector(unchanged: chunk) {
                if SentenceEmbedder.cosine(vector, kept) >= SuppliedVectors.minimumCosine {
                    vector = kept
                    reusedFromSnapshot += 1
                } else {
                    disagreeing += 1
                    fromFile += 1
                }
            } else {
                fromFile += 1
            }
            vectors.append(vector)
            pending.append((Self.textHash(chunk), vector))
        }
        try gathered?.store(modelKey: model.cacheKey, pending)
        return vectors
    }
}

/// An earlier version's vectors: by chunk id, or by the SHA-256 of the text each embeds through
/// a table of (text hash, rowid) written in the scratch folder from the verified snapshot's rows
/// on the first lookup by text; each vector read from the snapshot when asked for.
final class EarlierVectors {
    private let snapshot: Database
    private let read: Statement
    private let byID: Statement
    private let dimension: Int
    private let indexPath: String
    /// The text hashes' table and its lookup, once written (a vectors file's rows are looked up
    /// by id alone: a publish with `--vectors` never writes it).
    private var texts: (index: Database, find: Statement)?

    init(snapshot path: String, dimension: Int, scratch: String) throws(PublishError) {
        self.dimension = dimension
        indexPath = scratch + "/earlier-vectors-\(UUID().uuidString).sqlite"
        do {
            snapshot = try Database(path: path, mode: .readOnly(immutable: true))
            read = try snapshot.prepare("SELECT embedding FROM chunks WHERE rowid = ?1")
            byID = try snapshot.prepare("SELECT title, content, embedding FROM chunks WHERE id = ?1")
        } catch {
            throw PublishError(.io, "cannot open the earlier version's vectors: \(error.message)", cause: error)
        }
    }

    /// The table of text hashes, written on first use: one pass over the snapshot's rows.
    private func textIndex() throws(PublishError) -> Statement {
        if let texts { return texts.find }
        do {
            let index = try Database(path: indexPath, mode: .readWriteCreate)
            try index.turnOffJournal()
            try index.exec("PRAGMA synchronous = OFF; CREATE TABLE texts(hash BLOB PRIMARY KEY, row INTEGER) WITHOUT ROWID")
            let rows = try snapshot.prepare("SELECT rowid, title, content FROM chunks")
            let insert = try index.prepare("INSERT OR IGNORE INTO texts VALUES(?1, ?2)")
            try index.transaction { () throws(IndexError) in
                while try rows.step() {
                    let chunk = Chunk(id: "", title: rows.string(at: 1) ?? "", content: rows.string(at: 2) ?? "")
                    insert.reset()
                    try insert.bind(VectorSource.textHash(chunk).bytes, at: 1)
                    try insert.bind(rows.int64(at: 0), at: 2)
                    try insert.run()
                }
            }
            let find = try index.prepare("SELECT row FROM texts WHERE hash = ?1")
            texts = (index, find)
            return find
        } catch {
            throw PublishError(.io, "cannot index the earlier version's vectors: \(error.message)", cause: error)
        }
    }

    /// The earlier vector of `chunk` when the earlier version held it with the same title and
    /// content (so the same embedding text), or nil. By id, not by text: vectors given by a file
    /// may differ between chunks of the same text.
    func vector(unchanged chunk: Chunk) throws(PublishError) -> [Float]? {
        do {
            byID.reset()
            try byID.bind(chunk.id, at: 1)
            guard try byID.step(), (byID.string(at: 0) ?? "").utf8.elementsEqual(chunk.title.utf8),
                  (byID.string(at: 1) ?? "").utf8.elementsEqual(chunk.content.utf8),
                  let bytes = byID.blob(at: 2), bytes.count == dimension * 4 else { return nil }
            return VectorBytes.decode(bytes)
        } catch {
            throw PublishError(.io, "cannot read the earlier version's vectors: \(error.message)", cause: error)
        }
    }

    /// The earlier vector of a chunk whose embedding text hashes to `textHash`, or nil.
    func vector(textHash: ContentID) throws(PublishError) -> [Float]? {
        let find = try textIndex()
        do {
            find.reset()
            try find.bind(textHash.bytes, at: 1)
            guard try find.step() else { return nil }
            read.reset()
            try read.bind(find.int64(at: 0), at: 1)
            guard try read.step(), let bytes = read.blob(at: 0), bytes.count == dimension * 4 else { return nil }
            return VectorBytes.decode(bytes)
        } catch {
            throw PublishError(.io, "cannot read the earlier version's vectors: \(error.message)", cause: error)
        }
    }
}
