import CairnCore
import CairnSearch
import CairnStore
import Foundation

/// A BEIR-format folder as `cairn eval` reads it: `queries.jsonl`, `qrels/<split>.tsv`, and the
/// corpus (`corpus.jsonl` in the folder, or any file `SourceReader` reads, given separately).
struct EvalCollection {
    var name: String
    var collection: TestCollection
    /// The file to publish.
    var corpusPath: String

    static func load(folder: String, split: String, corpus: String?) throws(EvalFailure) -> EvalCollection {
        let queriesPath = folder + "/queries.jsonl", qrelsPath = folder + "/qrels/\(split).tsv"
        let corpusPath = corpus ?? folder + "/corpus.jsonl"
        for path in [queriesPath, qrelsPath, corpusPath] where !FileManager.default.fileExists(atPath: path) {
            throw .badInput("\(path) does not exist (expected a BEIR folder: corpus.jsonl, queries.jsonl, qrels/\(split).tsv; or --corpus)")
        }
        let parsed: TestCollection
        do {
            parsed = try TestCollection.parse(queriesJSONL: try read(queriesPath), qrelsTSV: try read(qrelsPath))
        } catch let error as CoreError {
            throw .badInput("\(folder): \(error.message)")
        } catch {
            throw (error as? EvalFailure) ?? .io("cannot read \(folder)")
        }
        guard !parsed.judgedQueries.isEmpty else {
            throw .badInput("\(qrelsPath): no query of queries.jsonl has a relevant judgment")
        }
        // Refused now, not after the publish, the sync and every query before it in four modes.
        for query in parsed.judgedQueries {
            if !query.text.unicodeScalars.contains(where: SearchBody.isVisible) {
                throw .badInput("\(queriesPath): query \"\(query.id)\" is empty; cairnd refuses an empty query (remove it, or its judgments)")
            }
            if query.text.utf8.count > SearchBody.maximumQueryBytes {
                throw .badInput("\(queriesPath): query \"\(query.id)\" is \(query.text.utf8.count) bytes; cairnd takes at most \(SearchBody.maximumQueryBytes) (shorten it, or remove it and its judgments)")
            }
        }
        let name = URL(fileURLWithPath: folder).standardizedFileURL.lastPathComponent
        return EvalCollection(name: name, collection: parsed, corpusPath: corpusPath)
    }

    private static func read(_ path: String) throws(EvalFailure) -> [UInt8] {
        do { return try FileSystem.read(path) } catch { throw .io(error.message) }
    }

    /// The JSONL corpus at `path` dealt into `parts` files, document i to part i mod `parts` (so
    /// each part is a fair sample), `scratch/corpus-<n>.jsonl`.
    static func split(_ path: String, into parts: Int, scratch: String) throws(EvalFailure) -> [String] {
        guard path.lowercased().hasSuffix(".jsonl") else { throw EvalFailure(2, "--channels needs a .jsonl corpus") }
        let data = try read(path)
        var contents = [[UInt8]](repeating: [], count: parts)
        for (index, line) in data.split(separator: UInt8(ascii: "\n")).enumerated() {
            contents[index % parts] += line
            contents[index % parts].append(UInt8(ascii: "\n"))
        }
        return try contents.enumerated().map { (index, bytes) throws(EvalFailure) -> String in
            let file = scratch + "/corpus-\(index + 1).jsonl"
            guard FileManager.default.createFile(atPath: file, contents: Data(bytes)) else { throw .io("cannot write \(file)") }
            return file
        }
    }

    /// The corpus as it can be published: a BEIR `.jsonl` corpus is copied to `scratch` without
    /// the records whose `text` is empty (Cairn refuses to publish an empty chunk; Cranfield has
    /// two), and the number dropped is returned. Other corpora are published as they are.
    func publishableCorpus(scratch: String) throws(EvalFailure) -> (path: String, dropped: Int) {
        guard corpusPath.lowercased().hasSuffix(".jsonl") else { return (corpusPath, 0) }
        let data = try Self.read(corpusPath)
        var kept: [UInt8] = [], dropped = 0
        for line in data.split(separator: UInt8(ascii: "\n")) {
            let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any]
            if let text = object?["text"] as? String, object?["content"] == nil,
               !text.contains(where: { !$0.isWhitespace }) {
                dropped += 1
                continue
            }
            kept += line
            kept.append(UInt8(ascii: "\n"))
        }
        let path = scratch + "/corpus.jsonl"
        guard FileManager.default.createFile(atPath: path, contents: Data(kept)) else { throw .io("cannot write \(path)") }
        return (path, dropped)
    }
}
