import CairnTestSupport
import Foundation
import Testing
@testable import CairnEmbedding

@Suite("BERT encoder on a tiny random model")
struct EncoderTests {
    @Test("Given random weights, when embedding, then the BLAS encoder matches a naive Double reference",
          arguments: [UInt64(1), 2, 3])
    func matchesNaiveReference(seed: UInt64) throws {
        let model = TinyModel(seed: seed)
        let embedder = try SentenceEmbedder(directory: try model.writeFolder())
        let sequences: [[Int32]] = [[2, 4, 5, 3], [2, 6, 7, 8, 12, 17, 18, 5, 13, 3], [2, 3], [2, 9, 10, 11, 19, 14, 3]]
        let vectors = embedder.embed(tokenIDs: sequences)
        for (sequence, vector) in zip(sequences, vectors) {
            let expected = model.naiveEmbedding(sequence)
            let maximumError = zip(vector, expected).map { abs(Double($0) - $1) }.max()!
            #expect(maximumError < 1e-5, "sequence \(sequence): max |Δ| = \(maximumError)")
        }
    }

    @Test("Given sequences of different lengths, when embedded in one batch or one by one, then the vectors agree")
    func batchingDoesNotChangeResults() throws {
        let embedder = try SentenceEmbedder(directory: try TinyModel(seed: 7).writeFolder())
        let sequences: [[Int32]] = [[2, 4, 3], [2, 5, 6, 7, 8, 9, 10, 11, 3], [2, 12, 13, 14, 3]]
        let batched = embedder.embed(tokenIDs: sequences)
        for (sequence, vector) in zip(sequences, batched) {
            let single = embedder.encoder.embed([sequence])[0]
            #expect(zip(vector, single).allSatisfy { abs($0 - $1) < 1e-6 })
        }
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

    @Test("Given the vector kernels, when compared with libm, then exp and erf are accurate")
    func vectorKernelsAreAccurate() {
        var worstExp: Float = 0, worstErf: Float = 0
        for step in 0..<4000 {
            let x = Float(step - 2000) / 100 // -20 … 20
            let e = VectorMath.exp(x)
            worstExp = max(worstExp, abs(e - Foundation.exp(x)) / max(Foundation.exp(x), 1e-30))
            worstErf = max(worstErf, abs(VectorMath.erf(x) - Foundation.erf(x)))
        }
        #expect(worstExp < 1e-6)
        #expect(worstErf < 3e-7)
    }
}
