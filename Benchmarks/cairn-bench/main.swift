// cairn-bench: the Swift side of scripts/bench and Benchmarks/bench-query. Prints one JSON object
// per run so that the scripts can put Cairn's figures beside the peers' in one table.
//
//   cairn-bench embed --passages FILE.jsonl --threads N [--model-dir DIR] [--queries 200]
//   cairn-bench make-datadir --corpus FILE --replicate N --out DIR [--model-dir DIR] [--cache FILE]
//   cairn-bench make-corpus --data DIR --size N --out DIR [--changed 1000] [--model-dir DIR] [--cache FILE]
//   cairn-bench query-load --socket PATH --queries FILE --mode M --clients C --count N
//   cairn-bench scan --data-dir DIR --queries FILE --mode dense|lexical [--threads T] [--export DIR]
//   cairn-bench sync-watch --socket PATH --version N [--query TEXT] [--mode M] [--after 50]
//   cairn-bench sync-time --socket PATH --version N --chunk ID [--data-dir DIR] [--interval-ms 2]
//   cairn-bench inflate-hash --blob FILE --size N [--file PATH]
//   cairn-bench install-phases --index FILE [--repeat 3]
import Foundation

let usage = """
    usage: cairn-bench embed|make-datadir|make-corpus|query-load|scan|sync-watch|sync-time|inflate-hash|install-phases [options]  (options: see Benchmarks/cairn-bench/*.swift)
    """

let arguments = Array(CommandLine.arguments.dropFirst())
do {
    switch arguments.first {
    case "embed": try benchEmbed(arguments)
    case "make-datadir": try makeDataDir(arguments)
    case "make-corpus": try makeCorpus(arguments)
    case "query-load": try queryLoad(arguments)
    case "scan": try scan(arguments)
    case "sync-watch": try syncWatch(arguments)
    case "sync-time": try syncTime(arguments)
    case "inflate-hash": try inflateHash(arguments)
    case "install-phases": try installPhases(arguments)
    default: throw Failure(description: usage)
    }
} catch {
    FileHandle.standardError.write(Data("cairn-bench: \(error)\n".utf8))
    exit(1)
}
