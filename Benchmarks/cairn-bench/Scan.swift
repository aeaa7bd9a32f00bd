import CairnBLAS
// cairn-bench scan --data-dir DIR --queries FILE --mode dense|lexical [--threads T] [--export DIR] [--shortlist F]
//
// In-process search times on the installed version of a data directory, per query, without
// the socket or the query embedding (queries are embedded first, then OpenBLAS gets T threads):
//   dense:   `SearchIndex.search(mode: .dense, k: 10)` with the precomputed query vector —
//            wall time, and its own `timings.dense_ms` (narrowing by sign bits above cairnd's
//            default `approximate_dense_above`, int8 scoring, exact rescoring, selection) — and
//            its recall@10 against exact search (the bare sgemv over the same n × d matrix, read
//            back from the snapshot, which is what faiss's IndexFlatIP is compared with); the
//            same search with narrowing off (`flat_*`: a full int8 scan) beside it.
//   lexical: `SearchIndex.search(mode: .lexical, k: 10)` — wall time and `timings.lexical_ms`.
// `--export DIR` writes DIR/vectors.f32 (the snapshot's matrix, rowid order) and
// DIR/queries.f32 (the query vectors) as raw float32 for the Python peers.
import CairnEmbedding
import CairnIndex
import Foundation

func scan(_ arguments: [String]) throws {
    let dataDirectory = try requiredOption("--data-dir", in: arguments)
    let queries = try Corpus.queries(try requiredOption("--queries", in: arguments))
    let mode = option("--mode", in: arguments) ?? "dense"
    let threads = try intOption("--threads", in: arguments, default: 1)
    let indexPath = join(dataDirectory, "current", "index.sqlite")
    var ranking = RankingConfiguration()
    if let share = option("--shortlist", in: arguments).flatMap(Double.init) { ranking.shortlistFraction = share }
    let index = try SearchIndex(path: indexPath, configuration: ranking)
    let clock = ContinuousClock()
    var result: [String: Any] = ["mode": mode, "threads": threads, "chunks": index.count, "queries": queries.count]

    switch mode {
    case "lexical":
        let (wall, inner) = try timeSearches(index, queries.map { ($0, nil) }, mode: .lexical, clock: clock) { $0.lexicalMilliseconds }
        result["search_p50_ms"] = percentile(wall, 0.5)
        result["search_p99_ms"] = percentile(wall, 0.99)
        result["lexical_p50_ms"] = percentile(inner, 0.5)
    case "dense":
        let embedder = try SentenceEmbedder(directory: join(dataDirectory, "current", "model"))
        let vectors = queries.map { embedder.embed($0) }
        let blas = try BLAS.shared
        blas.setThreads(threads)
        let (wall, inner) = try timeSearches(index, zip(queries, vectors).map { ($0, $1) }, mode: .dense, clock: clock) {
            $0.denseMilliseconds
        }
        let flat = try SearchIndex(path: indexPath, configuration: RankingConfiguration(approximateDenseAbove: .max))
        let (flatWall, flatInner) = try timeSearches(flat, zip(queries, vectors).map { ($0, $1) }, mode: .dense, clock: clock) {
            $0.denseMilliseconds
        }
        let matrix = try readMatrix(indexPath, count: index.count * index.meta.dimension)
        let sgemv = timeProducts(blas: blas, matrix: matrix, rows: index.count, vectors: vectors, clock: clock)
        let ids = try readIDs(indexPath)
        let exactSets = vectors.map { Set(exactTop(blas: blas, matrix: matrix, rows: index.count, query: $0, k: 10).map { ids[$0] }) }
        let (recall, flatRecall) = try (recallAt10(index), recallAt10(flat))
        func recallAt10(_ searched: SearchIndex) throws -> Double {
            var found = 0
            for (vector, exact) in zip(vectors, exactSets) {
                let answer = try searched.search(SearchRequest(query: "", k: 10, mode: .dense, minSimilarity: -1), queryVector: vector)
                found += answer.results.filter { exact.contains($0.chunk.id) }.count
            }
            return Double(found) / Double(10 * max(1, vectors.count))
        }
        result["narrowed"] = index.narrowsDense
        result["recall_at_10"] = recall
        result["flat_recall_at_10"] = flatRecall
        result["flat_search_p50_ms"] = percentile(flatWall, 0.5)
        result["flat_dense_p50_ms"] = percentile(flatInner, 0.5)
        if let export = option("--export", in: arguments) {
            try writeFloats(matrix, to: join(export, "vectors.f32"))
            try writeFloats(vectors.flatMap { $0 }, to: join(export, "queries.f32"))
        }
        result["search_p50_ms"] = percentile(wall, 0.5)
        result["search_p99_ms"] = percentile(wall, 0.99)
        result["dense_p50_ms"] = percentile(inner, 0.5)
        result["sgemv_p50_ms"] = percentile(sgemv, 0.5)
        result["openblas_threads"] = blas.threads
        result["openblas_core"] = blas.coreName
    default:
        throw Failure(description: "--mode must be dense or lexical")
    }
    try printJSON(result)
}

/// Per-query wall times (sorted) of `search` and the part `inner` picks from its timings, after
/// ten unmeasured warm-up queries.
private func timeSearches(_ index: SearchIndex, _ queries: [(String, [Float]?)], mode: SearchRequest.Mode,
                          clock: ContinuousClock,
                          inner: (SearchResponse.Timings) -> Double) throws -> ([Double], [Double]) {
    for (text, vector) in queries.prefix(10) { _ = try index.search(SearchRequest(query: text, k: 10, mode: mode), queryVector: vector) }
    var wall: [Double] = [], parts: [Double] = []
    for (text, vector) in queries {
        let start = clock.now
        let response = try index.search(SearchRequest(query: text, k: 10, mode: mode), queryVector: vector)
        wall.append(milliseconds(clock.now - start))
        parts.append(inner(response.timings))
    }
    return (wall.sorted(), parts.sorted())
}

/// Per-query times (sorted) of y = matrix · query alone.
private func timeProducts(blas: BLAS, matrix: [Float], rows: Int, vectors: [[Float]], clock: ContinuousClock) -> [Double] {
    let dimension = matrix.count / max(1, rows)
    var scores = [Float](repeating: 0, count: rows)
    var times: [Double] = []
    for (position, vector) in (vectors.prefix(10) + vectors).enumerated() {
        let start = clock.now
        matrix.withUnsafeBufferPointer { a in
            vector.withUnsafeBufferPointer { x in
                scores.withUnsafeMutableBufferPointer { y in
                    blas.sgemv(m: rows, n: dimension, a: a.baseAddress!, lda: dimension, x: x.baseAddress!, y: y.baseAddress!)
                }
            }
        }
        if position >= 10 { times.append(milliseconds(clock.now - start)) }
    }
    return times.sorted()
}

/// The rows (in `matrix` order) of the `k` highest dot products with `query`: exact search.
private func exactTop(blas: BLAS, matrix: [Float], rows: Int, query: [Float], k: Int) -> [Int] {
    let dimension = matrix.count / max(1, rows)
    var scores = [Float](repeating: 0, count: rows)
    matrix.withUnsafeBufferPointer { a in
        query.withUnsafeBufferPointer { x in
            scores.withUnsafeMutableBufferPointer { y in
                blas.sgemv(m: rows, n: dimension, a: a.baseAddress!, lda: dimension, x: x.baseAddress!, y: y.baseAddress!)
            }
        }
    }
    // The best k so far, best first; a row enters only above the k-th.
    var best: [Int] = []
    for row in scores.indices where best.count < k || scores[row] > scores[best[k - 1]] {
        let place = best.firstIndex { scores[$0] < scores[row] } ?? best.count
        best.insert(row, at: place)
        if best.count > k { best.removeLast() }
    }
    return best
}

/// The snapshot's chunk ids in rowid order.
private func readIDs(_ path: String) throws -> [String] {
    let db = try Database(path: path, mode: .readOnly(immutable: true))
    let statement = try db.prepare("SELECT id FROM chunks ORDER BY rowid")
    var ids: [String] = []
    while try statement.step() { ids.append(statement.string(at: 0) ?? "") }
    return ids
}

/// The snapshot's vectors in rowid order (the order `SearchIndex` loads them in).
private func readMatrix(_ path: String, count: Int) throws -> [Float] {
    let db = try Database(path: path, mode: .readOnly(immutable: true))
    let statement = try db.prepare("SELECT embedding FROM chunks ORDER BY rowid")
    var matrix: [Float] = []
    matrix.reserveCapacity(count)
    while try statement.step() {
        try statement.withBlob(at: 0) { bytes in
            for offset in stride(from: 0, to: bytes.count, by: 4) {
                matrix.append(Float(bitPattern: UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))))
            }
        }
    }
    return matrix
}
