import Testing
@testable import CairnCore

@Suite struct StateRootTests {
    struct Vectors: Decodable {
        struct Expected: Decodable {
            var content_hash: String, metadata_json: String, metadata_hash: String, embedding_hash: String, leaf: String
        }
        struct Entry: Decodable { var chunk: VectorChunk; var expected: Expected
            init(from decoder: Decoder) throws {
                chunk = try VectorChunk(from: decoder)
                expected = try decoder.container(keyedBy: Key.self).decode(Expected.self, forKey: .expected)
            }
            enum Key: CodingKey { case expected }
        }
        var chunks: [Entry]
        var state_root: String
    }

    @Test func givenTheVectorChunks_whenHashed_thenEveryHashAndTheRootMatch() throws {
        let vectors = try vector(Vectors.self, "state-root.json")
        for entry in vectors.chunks {
            let record = entry.chunk.record
            #expect(record.chunk.contentHash.hex == entry.expected.content_hash)
            #expect(record.chunk.metadataJSON.bytes == Array(entry.expected.metadata_json.utf8))
            #expect(record.chunk.metadataHash.hex == entry.expected.metadata_hash)
            #expect(StateRoot.embeddingHash(record.vector).hex == entry.expected.embedding_hash)
            #expect(record.stateRecord.leaf.hex == entry.expected.leaf)
        }
        let records = vectors.chunks.map(\.chunk.record)
        #expect(StateRoot.compute(chunks: records).hex == vectors.state_root)
        #expect(StateRoot.compute(chunks: records.reversed()).hex == vectors.state_root, "order of input does not matter")
    }

    @Test func givenMinusZero_whenHashed_thenItDiffersFromPlusZero() {
        #expect(StateRoot.embeddingHash([0]) != StateRoot.embeddingHash([-0.0]))
    }
}
