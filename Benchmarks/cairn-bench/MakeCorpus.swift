// cairn-bench make-corpus --data DIR --size N --out DIR [--changed 1000] [--copies apart|adjacent]
//                         [--model-dir M] [--cache FILE]
//
// A knowledge base of N chunks for `Benchmarks/bench-scale`, built from every collection in
// DIR (../shared/data: each `*/corpus.jsonl`, and NuraSafe's KnowledgeBase.json), with its
// vectors as a GPU machine would ship them (`publish --vectors`):
//   OUT/kb.jsonl, OUT/vectors.npy          version 1: N chunks {id, title, content}, float32 (N, 384)
//   OUT/kb-v2.jsonl, OUT/vectors-v2.npy    version 2: `changed` chunks differ (half rewritten,
//                                          a quarter removed, a quarter added)
//   OUT/kb-v3.jsonl, OUT/vectors-v3.npy    version 3: `changed` more, the same way
//   OUT/kb-v4.jsonl … OUT/vectors-v5.npy   versions 4 and 5: `changed` more each, the same way
//                                          (the bench's steady-state delta, timed three times)
//   OUT/queries.jsonl                      every collection's queries ({"text": …})
// Chunk i is copy c = i / D of document d = i % D (D documents) and takes one of three texts of
// its document by c % 3: the text as it is, the text without
// every seventh word, or the text with twelve words of the next document appended — so copies
// differ in their words, not only in their ids. Each of these texts is embedded once with the
// real model (the vectors are kept in `--cache` between runs), and each copy's vector is its
// text's plus uniform noise of ±0.0025 per value (cosine ≥ 0.9995: publish --vectors accepts it;
// no two copies tie).
//
// A snapshot holds its rows in id order. With `--copies apart` (the default) chunk i's id is
// `c<copy, 3 digits>/<collection>/<doc id>`: the file is the real collections (their documents
// in id order), then again for each further copy, so neighbouring rows are distinct documents,
// as in a real knowledge base, and a document's copies lie D rows apart. `--copies adjacent` gives the
// ids `<collection>/<doc id>#<copy>` of the runs before 2026-11-27 (evening), where a document's
// copies are neighbours: anything that gains from row locality (block bounds, the pages a short
// list of near-duplicates reads) looks better on it than on a real corpus.
//
// Versions 2 to 5 each change `changed` chunks, spread over the file in either layout: a half
// rewritten, a quarter removed, a quarter added as new copies. Versions 1 to 3 are the same as
// before versions 4 and 5 were added (2026-11-28) whenever size / (changed / 2) is 6 or more
// (every size the bench uses), so earlier runs' figures compare. Prints one JSON object:
// counts, bytes, seconds.
import CairnCore
import CairnEmbedding
import CairnIndex
import Foundation

func makeCorpus(_ arguments: [String]) throws {
    let data = try requiredOption("--data", in: arguments)
    let size = try intOption("--size", in: arguments, default: 10_000)
    let changed = try intOption("--changed", in: arguments, default: 1_000)
    let out = try requiredOption("--out", in: arguments)
    let copies = option("--copies", in: arguments) ?? "apart"
    guard copies == "apart" || copies == "adjacent" else { throw Failure(description: "--copies is apart or adjacent") }
    let modelDirectory = option("--model-dir", in: arguments) ?? SentenceEmbedder.defaultDirectory()
    let cachePath = option("--cache", in: arguments) ?? join(out, "texts.sqlite")
    try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)

    let documents = try collectionDocuments(data)
    guard !documents.isEmpty else { throw Failure(description: "\(data) holds no collection") }
    let embedder = try SentenceEmbedder(directory: modelDirectory)
    let cache = try TextVectors(path: cachePath, dimension: embedder.dimension)
    let clock = ContinuousClock()
    let start = clock.now
    // Every document's three texts, embedded where the cache has none.
    let texts = documents.indices.flatMap { d in (0..<3).map { variant(d, $0, of: documents) } }
    var missing: [Chunk] = []
    for text in texts where try cache.vector(text.embeddingText) == nil { missing.append(text) }
    for batchStart in stride(from: 0, to: missing.count, by: 256) {
        let batch = Array(missing[batchStart..<min(batchStart + 256, missing.count)])
        try cache.store(zip(batch.map(\.embeddingText), embedder.embed(batch.map(\.embeddingText))))
        FileHandle.standardError.write(Data("make-corpus: embedded \(batchStart + batch.count)/\(missing.count) texts\n".utf8))
    }
    let embedSeconds = milliseconds(clock.now - start) / 1e3

    func chunk(_ i: Int, rewritten: Bool = false) throws -> (Chunk, [Float]) {
        let (d, copy) = (i % documents.count, i / documents.count)
        var text = variant(d, (copy + (rewritten ? 1 : 0)) % 3, of: documents)
        let base = try cache.vector(text.embeddingText)!
        let document = "\(documents[d].collection)/\(documents[d].id)"
        text.id = copies == "adjacent" ? "\(document)#\(copy)" : "c\(String(format: "%03d", copy))/\(document)"
        var state = UInt64(truncatingIfNeeded: i) &* 0x9E37_79B9_7F4A_7C15 &+ (rewritten ? 7 : 1)
        let vector = base.map { value -> Float in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return value + (Float(state >> 40) / Float(1 << 24) - 0.5) * 0.005
        }
        return (text, vector)
    }
    // Versions 2 to 5, each `changed` chunks from the one before: half rewritten (chunk i in
    // version v when i mod every is below v - 1: every rewritten once), a quarter removed, a
    // quarter added (new copies). Versions 2 and 3 remove the chunks whose i mod every is
    // every - 1, those with i / every even and then odd; versions 4 and 5 those at every - 2
    // the same way: spread over the file as the rewritten ones are. At least 6, so that the
    // removed residues (every - 1, every - 2) are no rewritten one (0 to 3).
    let every = max(6, size / max(1, changed / 2))
    func removed(_ i: Int, in version: Int) -> Bool {
        stride(from: 2, through: version, by: 1).contains { v in i % every == every - 1 - (v - 2) / 2 && (i / every) % 2 == (v - 2) % 2 }
    }
    var textBytes = 0
    for version in 1...5 {
        let name = version == 1 ? "" : "-v\(version)"
        let kb = try JSONLinesWriter(path: join(out, "kb\(name).jsonl"))
        let rows = (0..<size).filter { !removed($0, in: version) } + Array(size..<(size + (version - 1) * changed / 4))
        let vectors = try NPYWriter(path: join(out, "vectors\(name).npy"), rows: rows.count, columns: embedder.dimension)
        for i in rows {
            let (text, vector) = try chunk(i, rewritten: i < size && i % every < version - 1)
            try kb.write(["id": text.id, "title": text.title, "content": text.content])
            try vectors.write(vector)
            if version == 1 { textBytes += text.title.utf8.count + text.content.utf8.count }
        }
        try kb.close()
        try vectors.close()
    }
    let queries = try JSONLinesWriter(path: join(out, "queries.jsonl"))
    for folder in try collections(data) where FileManager.default.fileExists(atPath: join(data, folder, "queries.jsonl")) {
        for query in try Corpus.queries(join(data, folder, "queries.jsonl")) { try queries.write(["text": query]) }
    }
    try queries.close()
    try printJSON([
        "chunks": size, "documents": documents.count, "texts_embedded": missing.count, "embed_seconds": embedSeconds,
        "text_bytes": textBytes, "vector_bytes": size * embedder.dimension * 4, "changed": changed,
    ])
}

private struct CollectionDocument {
    let collection: String
    let id: String
    let title: String
    let text: String
}

private func collections(_ data: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: data).sorted()
}

/// Every collection's documents, in collection then file order.
private func collectionDocuments(_ data: String) throws -> [CollectionDocument] {
    var documents: [CollectionDocument] = []
    for folder in try collections(data) {
        for file in ["corpus.jsonl", "KnowledgeBase.json"] where FileManager.default.fileExists(atPath: join(data, folder, file)) {
            documents += try Corpus.read(join(data, folder, file)).filter { !$0.text.isEmpty }
                .map { CollectionDocument(collection: folder, id: $0.id, title: $0.title, text: $0.text) }
        }
    }
    return documents
}

/// Text `variant` (0, 1, 2) of document `d`, as a chunk with an empty id.
private func variant(_ d: Int, _ variant: Int, of documents: [CollectionDocument]) -> Chunk {
    let document = documents[d]
    var words = document.text.split(separator: " ").map(String.init)
    switch variant {
    case 1: words = words.enumerated().filter { $0.offset % 7 != 6 }.map(\.element)
    case 2:
        let next = documents[(d + 1) % documents.count].text.split(separator: " ")
        words += next.prefix(12).map(String.init)
    default: break
    }
    return Chunk(id: "", title: document.title, content: words.joined(separator: " "))
}

/// Vectors by their text, in a SQLite file kept between runs.
private final class TextVectors {
    private let db: Database
    private let find: Statement
    private let dimension: Int

    init(path: String, dimension: Int) throws {
        self.dimension = dimension
        db = try Database(path: path, mode: .readWriteCreate)
        try db.exec("CREATE TABLE IF NOT EXISTS vectors(hash BLOB PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID")
        find = try db.prepare("SELECT vector FROM vectors WHERE hash = ?1")
    }

    func vector(_ text: String) throws -> [Float]? {
        find.reset()
        try find.bind(ContentID(hashing: Array(text.utf8)).bytes, at: 1)
        guard try find.step(), let bytes = find.blob(at: 0), bytes.count == dimension * 4 else { return nil }
        return bytes.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }

    func store(_ pairs: Zip2Sequence<[String], [[Float]]>) throws {
        try db.transaction { () throws(IndexError) in
            let insert = try db.prepare("INSERT OR REPLACE INTO vectors VALUES(?1, ?2)")
            for (text, vector) in pairs {
                insert.reset()
                try insert.bind(ContentID(hashing: Array(text.utf8)).bytes, at: 1)
                try insert.bind(vector.withUnsafeBytes { Array($0) }, at: 2)
                try insert.run()
            }
        }
    }
}

/// JSON lines written through a buffer.
private final class JSONLinesWriter {
    private let handle: FileHandle
    private var buffer = Data()

    init(path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw Failure(description: "cannot create \(path)")
        }
        self.handle = handle
    }

    func write(_ object: [String: String]) throws {
        buffer += try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        buffer.append(UInt8(ascii: "\n"))
        if buffer.count >= 1 << 20 { try flush() }
    }

    private func flush() throws {
        try handle.write(contentsOf: buffer)
        buffer.removeAll(keepingCapacity: true)
    }

    func close() throws {
        try flush()
        try handle.close()
    }
}

/// A NumPy `.npy` file (version 1, '<f4', C order) of `rows` × `columns`, written a row at a time.
private final class NPYWriter {
    private let handle: FileHandle
    private var buffer = Data()

    init(path: String, rows: Int, columns: Int) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw Failure(description: "cannot create \(path)")
        }
        self.handle = handle
        var header = "{'descr': '<f4', 'fortran_order': False, 'shape': (\(rows), \(columns)), }"
        // Magic (6) + version (2) + length (2) + header, padded with spaces to 64 bytes, ending in \n.
        while (10 + header.utf8.count + 1) % 64 != 0 { header += " " }
        header += "\n"
        buffer += [0x93] + Array("NUMPY".utf8) + [1, 0, UInt8(header.utf8.count & 0xFF), UInt8(header.utf8.count >> 8)]
        buffer += Data(header.utf8)
    }

    func write(_ row: [Float]) throws {
        row.withUnsafeBytes { buffer += $0 }
        if buffer.count >= 1 << 20 {
            try handle.write(contentsOf: buffer)
            buffer.removeAll(keepingCapacity: true)
        }
    }

    func close() throws {
        try handle.write(contentsOf: buffer)
        try handle.close()
    }
}
