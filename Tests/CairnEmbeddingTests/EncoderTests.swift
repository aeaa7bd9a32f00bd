import CairnTestSupport
import Foundation
import Testing
@testable import CairnEmbedding

@Suite("BERT encoder on a tiny random model")
struct EncoderTests {
    static let sequences: [[Int32]] = [[2, 4, 5, 3], [2, 6, 7, 8, 12, 17, 18, 5, 13, 3], [2, 3], [2, 9, 10, 11, 19, 14, 3]]

    @Test("Given random weights and each kernel set, when a short batch is embedded (packed kernel), then it matches a naive Double reference",
          arguments: [UInt64(1), 2, 3], EncoderKernels.InstructionSet.allCases)
    func shortBatchMatchesNaiveReference(seed: UInt64, set: EncoderKernels.InstructionSet) throws {
        // A recorded skip, never a pass; nor a failure under CAIRN_REQUIRE_MODEL=1: no set-up
        // gives a CPU an instruction set.
        guard let kernels = EncoderKernels(set) else { try Test.cancel("this CPU cannot run the \(set) kernels") }
        let model = TinyModel(seed: seed)
        let embedder = try SentenceEmbedder(directory: try model.writeFolder(), kernels: kernels)
        #expect(Self.sequences.joined().count <= BertEncoder.packedKernelMaximumTokens)
        for parallelism in [1, 2] {
            let vectors = embedder.encoder.embed(Self.sequences, parallelism: parallelism)
            expectClose(vectors, to: Self.sequences.map(model.naiveEmbedding), "\(kernels), parallelism \(parallelism)")
        }
    }

    @Test("Given random weights and each kernel set, when a long batch is embedded (sgemm), then it matches a naive Double reference",
          arguments: [UInt64(1), 2], EncoderKernels.InstructionSet.allCases)
    func longBatchMatchesNaiveReference(seed: UInt64, set: EncoderKernels.InstructionSet) throws {
        guard let kernels = EncoderKernels(set) else { try Test.cancel("this CPU cannot run the \(set) kernels") }
        let model = TinyModel(seed: seed)
        let embedder = try SentenceEmbedder(directory: try model.writeFolder(), kernels: kernels)
        let sequences = Array(repeating: Self.sequences, count: 4).joined() + [[2, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 3]]
        #expect(sequences.joined().count > BertEncoder.packedKernelMaximumTokens)
        for parallelism in [1, 2] {
            let vectors = embedder.encoder.embed(Array(sequences), parallelism: parallelism)
            expectClose(vectors, to: sequences.map(model.naiveEmbedding), "\(kernels), parallelism \(parallelism)")
        }
    }

    func expectClose(_ vectors: [[Float]], to expected: [[Double]], _ context: String) {
        #expect(vectors.count == expected.count && !expected.isEmpty, "\(context): \(vectors.count) vectors for \(expected.count) references")
        for (vector, reference) in zip(vectors, expected) {
            #expect(vector.count == reference.count && !reference.isEmpty, "\(context): dimension \(vector.count), reference \(reference.count)")
            let maximumError = zip(vector, reference).map { abs(Double($0) - $1) }.max()!
            #expect(maximumError < 1e-5, "\(context): max |Δ| = \(maximumError)")
        }
    }

    @Test("Given sequences of different lengths, when embedded in one batch or one by one, then the vectors agree")
    func batchingDoesNotChangeResults() throws {
        let embedder = try SentenceEmbedder(directory: try TinyModel(seed: 7).writeFolder())
        let sequences: [[Int32]] = [[2, 4, 3], [2, 5, 6, 7, 8, 9, 10, 11, 3], [2, 12, 13, 14, 3]]
        let batched = embedder.embed(tokenIDs: sequences)
        #expect(batched.count == sequences.count)
        for (sequence, vector) in zip(sequences, batched) {
            let single = embedder.encoder.embed([sequence])[0]
            #expect(vector.count == single.count && !single.isEmpty)
            #expect(zip(vector, single).allSatisfy { abs($0 - $1) < 1e-6 })
        }
    }

    @Test("Given many workers, when batches are sized, then all of them at once stay within the memory budget, never below one whole sequence; with few, the requested size stands; and the vectors are the same either way")
    func batchesShrinkWithManyWorkers() throws {
        let perToken = (5 * 384 + 1536) * 4  // all-MiniLM-L6-v2
        #expect(SentenceEmbedder.batchTokens(4096, running: 2, bytesPerToken: perToken, longest: 256) == 4096)
        let many = SentenceEmbedder.batchTokens(4096, running: 32, bytesPerToken: perToken, longest: 256)
        #expect(many < 4096 && many >= 256 && 32 * many * perToken <= SentenceEmbedder.batchMemoryBudget)
        #expect(SentenceEmbedder.batchTokens(4096, running: 10_000, bytesPerToken: perToken, longest: 256) == 256)

        let embedder = try SentenceEmbedder(directory: try TinyModel(seed: 7).writeFolder())
        var sequences: [[Int32]] = []
        for n in 0..<40 {
            let words: [Int32] = (0..<(n % 9 + 1)).map { Int32(4 + ($0 + n) % 11) }
            sequences.append([2] + words + [3])
        }
        let few = embedder.embed(tokenIDs: sequences, workers: 1), spread = embedder.embed(tokenIDs: sequences, batchTokens: 16, workers: 7)
        #expect(few.count == sequences.count && zip(few, spread).allSatisfy { zip($0, $1).allSatisfy { abs($0 - $1) < 1e-6 } })
    }

    @Test("Given any text, when embedded, then the vector has unit length and the model's dimension")
    func vectorsAreUnitLength() throws {
        let embedder = try SentenceEmbedder(directory: try TinyModel(seed: 11).writeFolder())
        for vector in embedder.embed(["the water is safe to drink", "flood maps!", "", "storm, storm, storm."]) {
            #expect(vector.count == 8)
            let norm = vector.reduce(0) { $0 + $1 * $1 }.squareRoot()
            #expect(abs(norm - 1) < 1e-5)
        }
    }

    @Test("Given a model folder without weights, when loading, then the error names the missing file")
    func missingWeightsAreReported() throws {
        let folder = try TinyModel(seed: 1).writeFolder()
        try FileManager.default.removeItem(atPath: folder + "/model.safetensors")
        #expect(throws: EmbeddingError.self) { try SentenceEmbedder(directory: folder) }
        do {
            _ = try SentenceEmbedder(directory: folder)
        } catch {
            #expect(error.code == .modelNotFound)
            #expect(error.message.contains("model.safetensors"))
        }
    }
}
