import CairnBLAS
// cairn-bench embed --passages FILE.jsonl --threads N [--model-dir DIR] [--queries 200]
//
// Passages per second and short-query latency of the embedding engine (scripts/bench embed).
import CairnEmbedding
import Foundation

func readPassages(_ path: String) throws -> [String] {
    try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map { line in
        guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
              let text = object["text"] as? String else { throw Failure(description: "\(path): a line without \"text\"") }
        return text
    }
}

func benchEmbed(_ arguments: [String]) throws {
    guard let passagesPath = option("--passages", in: arguments) else { throw Failure(description: "--passages FILE is required") }
    let threads = Int(option("--threads", in: arguments) ?? "1") ?? 1
    let queryCount = Int(option("--queries", in: arguments) ?? "200") ?? 200
    let embedder = try SentenceEmbedder(directory: option("--model-dir", in: arguments) ?? SentenceEmbedder.defaultDirectory())
    let blas = try BLAS.shared
    // Cairn's parallelism is whole batches on `threads` workers, each on one OpenBLAS thread.
    let passages = try readPassages(passagesPath)
    let clock = ContinuousClock()
    _ = embedder.embed(Array(passages.prefix(32)), workers: threads)  // warm-up
    let tokens = passages.reduce(0) { $0 + embedder.tokenizer.encode($1).count }
    let elapsed = clock.measure { _ = embedder.embed(passages, workers: threads) }
    let queries = passages.prefix(queryCount).map { $0.split(separator: " ").prefix(8).joined(separator: " ") }
    var latencies: [Double] = []
    for query in queries {
        latencies.append(milliseconds(clock.measure {
            _ = embedder.encoder.embed([embedder.tokenizer.encode(query)], parallelism: threads)
        }))
    }
    latencies.sort()
    let result: [String: Any] = [
        "engine": "cairn", "threads": threads, "openblas_core": blas.coreName,
        "passages": passages.count, "tokens": tokens,
        "passages_per_s": Double(passages.count) / (milliseconds(elapsed) / 1e3),
        "query_p50_ms": latencies[latencies.count / 2],
        "query_p99_ms": latencies[min(latencies.count - 1, latencies.count * 99 / 100)],
    ]
    print(String(decoding: try JSONSerialization.data(withJSONObject: result, options: [.sortedKeys]), as: UTF8.self))
}
