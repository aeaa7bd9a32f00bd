import CairnTestSupport
import Foundation
import Testing
@testable import CairnEmbedding

/// The real all-MiniLM-L6-v2 (scripts/fetch-model), checked against its published similarities,
/// the Hugging Face `tokenizers` package and an independent numpy implementation
/// (Tests/Reference/). Each test needs the model, and the passage tests also the reference venv
/// (CAIRN_PYTHON) and ../shared/data/: where one is missing the test is skipped and says why, or
/// fails under CAIRN_REQUIRE_MODEL=1 (`requireOrSkip`); it never passes without comparing.
@Suite("all-MiniLM-L6-v2, the real model", .offCooperativePool, .serialized)
struct RealModelTests {
    static let modelDirectory = SentenceEmbedder.defaultDirectory()
    static let modelPresent = FileManager.default.fileExists(atPath: modelDirectory + "/model.safetensors")
    /// The loaded model, or why it did not load (kept, so the test reports the real error).
    static let embedder: Result<SentenceEmbedder, any Error>? = modelPresent
        ? Result { try SentenceEmbedder(directory: modelDirectory) } : nil

    /// Texts that stress the tokenizer's rules, added to the real passages.
    static let trickyTexts = [
        "Café naïve résumé — Ångström, Øresund, Straße; ÉCOLE!", "北京市 水災 避難所 and 東京", "emoji 🔥🌊 fire/flood ⚠️",
        "C++ & C#: $5.00 (50%) <tag> a|b ^x ~y `z` \"q\" 'r'", "İstanbul ǅemal ΣΊΣΥΦΟΣ ﬁnal", "zero\u{200B}width\u{00A0}nbsp\ttab\r\nline",
        "control\u{0001}chars\u{007F}and\u{FFFD}replacement", String(repeating: "supercalifragilistic", count: 7),
        "العربية הִתְפַּלְּלוּ हिन्दी ภาษาไทย", "1/2 ⅓ ² ³ x² H₂O 10km/h 9-1-1 e.g. U.S.A.",
    ]

    /// ≥ 1,000 real passages: Cranfield abstracts, NFCorpus documents and the NuraSafe knowledge base.
    static func realPassages(limit: Int) throws -> [String]? {
        guard let shared = TestEnvironment.sharedData,
              ["cranfield/corpus.jsonl", "nfcorpus/corpus.jsonl", "nurasafe/KnowledgeBase.json"]
                .allSatisfy({ FileManager.default.fileExists(atPath: "\(shared)/\($0)") }) else { return nil }
        var texts: [String] = []
        for collection in ["cranfield", "nfcorpus"] {
            let lines = try String(contentsOfFile: "\(shared)/\(collection)/corpus.jsonl", encoding: .utf8).split(separator: "\n")
            for line in lines.prefix(limit / 2) {
                let record = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
                texts.append(((record["title"] as? String).map { $0 + "\n\n" } ?? "") + (record["text"] as? String ?? ""))
            }
        }
        let knowledgeBase = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(shared)/nurasafe/KnowledgeBase.json"))) as! [[String: Any]]
        texts += knowledgeBase.map { "\($0["title"] as? String ?? "")\n\n\($0["content"] as? String ?? "")" }
        return texts
    }

    /// The embedder; skips the test where the model is absent (fails under
    /// CAIRN_REQUIRE_MODEL=1), and fails it where the model is present but does not load.
    func requireEmbedder() throws -> SentenceEmbedder {
        try requireOrSkip(Self.embedder, "the model is not in \(Self.modelDirectory); run scripts/fetch-model").get()
    }

    /// The reference venv's python; skips where CAIRN_PYTHON is unset (fails under CAIRN_REQUIRE_MODEL=1).
    func requirePython() throws -> String {
        try requireOrSkip(TestEnvironment.python, "CAIRN_PYTHON does not name the reference venv's python; run the suite with scripts/test")
    }

    /// ≥ `limit` real passages; skips where ../shared/data (or a collection of it) is absent,
    /// always: the suite must pass on a fresh clone without it (CI has it, and runs these).
    func requirePassages(limit: Int) throws -> [String] {
        guard let passages = try Self.realPassages(limit: limit) else {
            try Test.cancel("../shared/data (cranfield, nfcorpus, nurasafe) is not beside the checkout: skipped (CI has it)")
        }
        return passages
    }

    @Test("Given the published pairs, when embedded, then the cosines are 0.6660 and 0.1046 (± 0.0005)")
    func publishedSimilarities() throws {
        let embedder = try requireEmbedder()
        let vectors = embedder.embed(["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."])
        #expect(vectors.allSatisfy { $0.count == 384 })
        #expect(abs(SentenceEmbedder.cosine(vectors[0], vectors[1]) - 0.6660) <= 0.0005)
        #expect(abs(SentenceEmbedder.cosine(vectors[0], vectors[2]) - 0.1046) <= 0.0005)
    }

    @Test("Given ≥ 1,000 real passages, when tokenized, then the ids equal Hugging Face tokenizers' exactly")
    func tokenIDsMatchHuggingFace() throws {
        let embedder = try requireEmbedder(), python = try requirePython()
        let passages = try requirePassages(limit: 1_200)
        let texts = passages + Self.trickyTexts
        #expect(texts.count >= 1_000)
        let run = try TestEnvironment.run(python, [TestEnvironment.repositoryRoot + "/Tests/Reference/tokenize_ref.py",
                                                   "--model-dir", Self.modelDirectory], input: try TestEnvironment.jsonLines(texts))
        try #require(run.status == 0, "tokenize_ref.py failed: \(run.error)")
        let lines = run.output.split(separator: UInt8(ascii: "\n"))
        try #require(lines.count == texts.count)
        var mismatches = 0
        for (text, line) in zip(texts, lines) {
            let expected = (try JSONSerialization.jsonObject(with: Data(line)) as! [String: Any])["ids"] as! [Int]
            let actual = embedder.tokenizer.encode(text, maximumLength: 256).map(Int.init)
            if actual != expected {
                mismatches += 1
                if mismatches <= 3 {
                    Issue.record("token ids differ for a passage of \(text.count) characters at index \(Array(zip(actual, expected)).firstIndex { $0 != $1 } ?? min(actual.count, expected.count))")
                }
            }
        }
        #expect(mismatches == 0, "\(mismatches) of \(texts.count) passages tokenized differently")
    }

    @Test("Given ≥ 200 real passages and short queries, when embedded with each kernel set, then every vector is within cosine 0.9999 of the numpy reference")
    func embeddingsMatchNumpyReference() throws {
        let embedder = try requireEmbedder(), python = try requirePython()
        let passages = try requirePassages(limit: 240)
        let texts = Array(passages.prefix(230)) + Self.trickyTexts
        #expect(texts.count >= 200)
        // Queries of ≤ 16 tokens, embedded one at a time: the packed-weight kernel's route.
        let queries = texts.prefix(60).map { $0.split(separator: " ").prefix(6).joined(separator: " ") }
        #expect(queries.allSatisfy { embedder.tokenizer.encode($0).count <= BertEncoder.packedKernelMaximumTokens })
        let run = try TestEnvironment.run(python, [TestEnvironment.repositoryRoot + "/Tests/Reference/embed_ref.py",
                                                   "--model-dir", Self.modelDirectory],
                                          input: try TestEnvironment.jsonLines(texts + queries))
        try #require(run.status == 0, "embed_ref.py failed: \(run.error)")
        let lines = run.output.split(separator: UInt8(ascii: "\n"))
        try #require(lines.count == texts.count + queries.count)
        let references = try lines.map { line in
            ((try JSONSerialization.jsonObject(with: Data(line)) as! [String: Any])["embedding"] as! [Double]).map(Float.init)
        }
        let queryReferences = references.suffix(queries.count)
        for kernels in EncoderKernels.available {
            // The CPU's own set embeds every passage; the narrower ones (which only a CPU without
            // AVX-512 or AVX2 would use) the first 40 and the tricky texts, to keep the run short.
            let best = kernels.description == embedder.encoder.kernels.description
            let model = best ? embedder : try SentenceEmbedder(directory: Self.modelDirectory, kernels: kernels)
            let chosen = best ? Array(texts.indices) : Array(0..<40) + Array((texts.count - Self.trickyTexts.count)..<texts.count)
            let vectors = model.embed(chosen.map { texts[$0] }) + queries.map { model.embed($0) }
            let expected = chosen.map { references[$0] } + queryReferences
            try #require(vectors.count == expected.count && !vectors.isEmpty, "\(kernels): \(vectors.count) vectors for \(expected.count) references")
            let worst = zip(expected, vectors).map { SentenceEmbedder.cosine($0, $1) }.min()!
            #expect(worst >= 0.9999, "\(kernels): lowest cosine to the reference: \(worst)")
        }
    }

    @Test("Given vectors the numpy reference computed for the example knowledge base, saved by numpy as a GPU machine would ship them, when `cairn-server publish --vectors` runs with the real model, then a float32 file is taken whole, the same vectors as float16 next keep the first version's (each row agrees), and the same file with two rows swapped is refused (exit 65) with one line naming one of them")
    func publishWithReferenceVectors() throws {
        _ = try requireEmbedder()
        let python = try requirePython()
        let folder = try TemporaryDirectory.make()
        let source = TestEnvironment.repositoryRoot + "/examples/kb/knowledge-base.json"
        let records = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: source))) as! [[String: Any]]
        // What Cairn embeds for a chunk: its title, a blank line, its content (Chunk.embeddingText).
        let texts = records.map { record in
            let (title, content) = (record["title"] as? String ?? "", record["content"] as? String ?? "")
            return title.isEmpty ? content : title + "\n\n" + content
        }
        let reference = try TestEnvironment.run(python, [TestEnvironment.repositoryRoot + "/Tests/Reference/embed_ref.py",
                                                         "--model-dir", Self.modelDirectory], input: try TestEnvironment.jsonLines(texts))
        try #require(reference.status == 0, "embed_ref.py failed: \(reference.error)")
        try reference.output.write(to: URL(fileURLWithPath: folder + "/vectors.jsonl"))
        let save = try TestEnvironment.run(python, ["-c", """
            import json, sys, numpy as np
            folder = sys.argv[1]
            v = np.array([json.loads(line)["embedding"] for line in open(folder + "/vectors.jsonl")], dtype="<f4")
            np.save(folder + "/f32.npy", v)
            np.save(folder + "/f16.npy", v.astype("<f2"))
            s = v.copy(); s[[0, 1]] = s[[1, 0]]
            np.save(folder + "/swapped.npy", s)
            """, folder])
        try #require(save.status == 0, "numpy: \(save.error)")
        let keygen = try Binaries.run("cairn-server", ["keygen", "--out", folder + "/keys"], in: folder)
        try #require(keygen.status == 0, "\(keygen.error)")
        func publish(_ file: String) throws -> (status: Int32, output: String, error: String) {
            try Binaries.run("cairn-server", ["publish", "--repo", folder + "/repo", "--channel", "kb", "--source", source,
                                              "--model-dir", Self.modelDirectory, "--no-cache", "--key", folder + "/keys/publisher.key",
                                              "--vectors", folder + "/" + file, "--verify-sample", "1000"], in: folder)
        }
        let f32 = try publish("f32.npy")
        #expect(f32.status == 0, "f32.npy: \(f32.error)")
        #expect(f32.output.contains("\(texts.count) chunks, \(texts.count) from the vectors file, 0 embedded"), "f32.npy: \(f32.output)")
        // The same vectors again as float16, version 2: every row agrees with version 1's vector
        // for its unchanged chunk, which it keeps, so the delta changes nothing.
        let f16 = try publish("f16.npy")
        #expect(f16.status == 0, "f16.npy: \(f16.error)")
        #expect(f16.output.contains("\(texts.count) chunks, 0 embedded, \(texts.count) reused (\(texts.count) from earlier snapshots"),
                "f16.npy: \(f16.output)")
        let swapped = try publish("swapped.npy")
        #expect(swapped.status == 65)
        let lines = swapped.error.split(separator: "\n")
        #expect(lines.count == 1 && (lines.first?.contains("row 0 (chunk") == true || lines.first?.contains("row 1 (chunk") == true),
                "\(swapped.error)")
    }
}
