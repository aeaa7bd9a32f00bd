import Testing
@testable import CairnCore

@Suite struct StateRootTests {
    struct Vectors: Decodable {
        struct Expected: Decodable {
            var content_hash: String, metadata_json: String, metadata_hash: String, embedding_hash: String, leaf: String
        }
        struct Entry: Decodable { var chunk: VectorChunk; var expected: Expected
            init(from decoder: any Decoder) throws {
                chunk = try VectorChunk(from: decoder)
                expected = try decoder.container(keyedBy: Key.self).decode(Expected.self, forKey: .expected)
            }
            enum Key: CodingKey { case expected }
        }
        var chunks: [Entry]
        var state_root: String
        var set_hash_empty: String, set_hash: String
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

    @Test func givenTheVectorChunks_whenTheirSetHashIsTaken_thenItIsTheVectorsInAnyOrder() throws {
        let vectors = try vector(Vectors.self, "state-root.json")
        let leaves = vectors.chunks.map(\.chunk.record.stateRecord.leaf)
        #expect(SetHash().digest(count: 0).hex == vectors.set_hash_empty)
        #expect(SetHash(leaves: leaves).digest(count: 3).hex == vectors.set_hash)
        #expect(SetHash(leaves: leaves.reversed()).digest(count: 3).hex == vectors.set_hash)
        #expect(SetHash(leaves: leaves).digest(count: 2).hex != vectors.set_hash, "the count is hashed")
    }

    @Test func givenASetHash_whenLeavesAreRemovedAndAdded_thenItEqualsTheHashOfTheResultingSet() {
        let leaves = (0..<200).map { ContentID(hashing: [UInt8(truncatingIfNeeded: $0), UInt8($0 >> 8)]) }
        var changed = SetHash(leaves: leaves)
        // Remove 50, add 30 new ones: the hash of what is left, built from nothing, is the same.
        for leaf in leaves[..<50] { leaf.bytes.withUnsafeBytes { changed.remove(leaf: $0) } }
        let added = (1_000..<1_030).map { ContentID(hashing: [UInt8(truncatingIfNeeded: $0), UInt8($0 >> 8), 7]) }
        for leaf in added { leaf.bytes.withUnsafeBytes { changed.add(leaf: $0) } }
        let expected = SetHash(leaves: Array(leaves[50...]) + added)
        #expect(changed == expected)
        #expect(changed.digest(count: 180) == expected.digest(count: 180))
        // Two halves added together are the whole; a set missing one leaf is another hash.
        var halves = SetHash(leaves: leaves[..<100])
        halves.add(SetHash(leaves: leaves[100...]))
        #expect(halves == SetHash(leaves: leaves))
        #expect(SetHash(leaves: leaves.dropLast()).digest(count: 199) != SetHash(leaves: leaves).digest(count: 199))
    }

    @Test func givenMinusZero_whenHashed_thenItDiffersFromPlusZero() {
        #expect(StateRoot.embeddingHash([0]) != StateRoot.embeddingHash([-0.0]))
    }

    @Test(arguments: [
        Chunk(id: "a", title: "Say \"hi\"\\ \u{1}\u{1F}", content: "", scenario: "flood", tags: ["a\"b", "ü", ""], source: "x\\y"),
        Chunk(id: "b", title: "", content: "", tags: []),
        Chunk(id: "c", title: "Ωmega\n", content: "", scenario: nil, tags: ["one"], source: "s"),
    ])
    func givenAChunk_whenItsMetadataIsWrittenDirectly_thenTheBytesEqualTheCanonicalJSONValue(chunk: Chunk) {
        var direct: [UInt8] = []
        Chunk.writeMetadataJSON(title: chunk.title.utf8, scenario: chunk.scenario?.utf8, tags: chunk.tags,
                                source: chunk.source?.utf8, to: &direct)
        #expect(direct == chunk.metadataJSON.bytes)
        #expect(chunk.metadataHash == ContentID(hashing: chunk.metadataJSON.bytes))
    }

    @Test func givenTheVectorChunksAsStoredRows_whenChecked_thenEachLeafMatchesAndAnAlteredHashIsCaught() throws {
        let vectors = try vector(Vectors.self, "state-root.json")
        var check = StoredRowCheck()
        for entry in vectors.chunks {
            let chunk = entry.chunk.record.chunk
            let embedding = hexBytes(entry.chunk.vector_f32le_hex)
            func run(_ content: String, _ metadata: String, _ embeddingHash: String) -> StoredRowCheck.Outcome {
                func utf8<T>(_ text: String?, _ body: (UnsafeBufferPointer<UInt8>?) -> T) -> T {
                    guard var text else { return body(nil) }
                    return text.withUTF8 { body($0) }
                }
                return utf8(chunk.title) { title in utf8(chunk.content) { body in utf8(chunk.scenario) { scenario in
                    utf8(chunk.source) { source in utf8(content) { c in utf8(metadata) { m in utf8(embeddingHash) { e in
                        embedding.withUnsafeBytes { vector in
                            check.check(id: chunk.id, title: title!, content: body!, scenario: scenario, tags: chunk.tags,
                                        source: source, embedding: vector, storedHashes: (c, m, e))
                        }
                    } } } } } } }
            }
            let expected = entry.expected
            #expect(run(expected.content_hash, expected.metadata_hash, expected.embedding_hash) == .leaf(ContentID(hex: expected.leaf)!))
            let flipped = String(expected.metadata_hash.dropLast()) + (expected.metadata_hash.hasSuffix("0") ? "1" : "0")
            #expect(run(expected.content_hash, flipped, expected.embedding_hash) == .mismatch)
            #expect(run(expected.content_hash, expected.metadata_hash, expected.embedding_hash.uppercased()) == .malformedHash)
            #expect(run("", expected.metadata_hash, expected.embedding_hash) == .malformedHash)
        }
    }

}
