// The benchmark corpus: a BEIR corpus.jsonl (`_id`, `title`, `text`) or the example knowledge
// base (`id`, `title`, `content`), replicated to any number of chunks by one fixed rule that
// Benchmarks/peers/bench_query_peers.py repeats exactly.
import CairnCore
import Foundation

struct Document {
    let id: String
    let title: String
    let text: String
}

enum Corpus {
    /// Reads BEIR JSON lines, or a JSON array of knowledge-base chunks when the file is `.json`.
    static func read(_ path: String) throws -> [Document] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        if path.hasSuffix(".json") {
            guard let array = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] else {
                throw Failure(description: "\(path): not a JSON array of chunks")
            }
            return array.map { Document(id: $0["id"] as? String ?? "", title: $0["title"] as? String ?? "",
                                        text: $0["content"] as? String ?? "") }
        }
        return try String(decoding: data, as: UTF8.self).split(separator: "\n").map { line in
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let id = object["_id"] as? String else { throw Failure(description: "\(path): a line without \"_id\"") }
            return Document(id: id, title: object["title"] as? String ?? "", text: object["text"] as? String ?? "")
        }
    }

    /// Chunk `i` of a corpus replicated to `count` chunks: document `i % D`, copy `i / D`; the
    /// first copy keeps the document's id, later ones get `<id>~<copy>`.
    static func chunk(_ i: Int, of documents: [Document]) -> Chunk {
        let document = documents[i % documents.count]
        let copy = i / documents.count
        return Chunk(id: copy == 0 ? document.id : "\(document.id)~\(copy)", title: document.title, content: document.text)
    }

    /// The vector of copy `copy` of a document: the document's own vector for copy 0, else that
    /// vector plus small deterministic noise (uniform ±0.02 per value, cosine ≈ 0.98 to the
    /// original), renormalised, so that copies are near neighbours but never exact ties.
    static func vector(_ base: ArraySlice<Float>, copy: Int, seed: Int) -> [Float] {
        guard copy > 0 else { return Array(base) }
        var state = UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15 &+ 1
        var vector = base.map { value -> Float in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let unit = Float(state >> 40) / Float(1 << 24)  // 0..<1
            return value + (unit - 0.5) * 0.04
        }
        let norm = vector.reduce(0) { $0 + $1 * $1 }.squareRoot()
        for index in vector.indices { vector[index] /= norm }
        return vector
    }

    /// Query texts: `text` of each line of a BEIR queries.jsonl, or the titles of a knowledge
    /// base `.json` (short questions in the users' own words are not shipped with it).
    static func queries(_ path: String) throws -> [String] {
        if path.hasSuffix(".json") { return try read(path).map(\.title) }
        let text = try String(contentsOfFile: path, encoding: .utf8)
        return try text.split(separator: "\n").map { line in
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let query = object["text"] as? String else { throw Failure(description: "\(path): a line without \"text\"") }
            return query
        }
    }
}
