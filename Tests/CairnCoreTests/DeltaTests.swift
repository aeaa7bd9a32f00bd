import Foundation
import Testing
@testable import CairnCore

@Suite struct DeltaTests {
    struct Vectors: Decodable {
        var from_version: Int, to_version: Int, from_state_root: String, to_state_root: String, dimension: Int
        var new_chunks: [VectorChunk]
        var upsert_ids: [String], delete_ids: [String]
        var size: Int, sha256: String, hex: String
        var to_set_hash: String, format2_size: Int, format2_sha256: String, format2_hex: String
    }
    struct StateRootVectors: Decodable { var chunks: [VectorChunk] }

    func fixture() throws -> (vectors: Vectors, old: [ChunkRecord], new: [ChunkRecord]) {
        let vectors = try vector(Vectors.self, "delta.json")
        let old = try vector(StateRootVectors.self, "state-root.json").chunks.map(\.record)
        return (vectors, old, vectors.new_chunks.map(\.record))
    }

    @Test func givenTwoVersions_whenDiffed_thenTheEncodingIsTheVector() throws {
        let (v, old, new) = try fixture()
        let delta = try Delta.between(old: old, new: new, fromVersion: v.from_version, toVersion: v.to_version, dimension: v.dimension,
                                      withSetHash: false)
        #expect(delta.upserts.map(\.chunk.id) == v.upsert_ids)
        #expect(delta.deletes == v.delete_ids)
        #expect(delta.fromStateRoot.hex == v.from_state_root && delta.toStateRoot.hex == v.to_state_root)
        #expect(delta.toSetHash == nil)
        #expect(hexString(delta.encoded) == v.hex)
        #expect(delta.encoded.count == v.size)
        #expect(ContentID(hashing: delta.encoded).hex == v.sha256)
    }

    @Test func givenTwoVersions_whenDiffedWithTheSetHash_thenTheEncodingIsTheFormat2Vector() throws {
        let (v, old, new) = try fixture()
        let delta = try Delta.between(old: old, new: new, fromVersion: v.from_version, toVersion: v.to_version, dimension: v.dimension)
        #expect(delta.toSetHash?.hex == v.to_set_hash)
        #expect(hexString(delta.encoded) == v.format2_hex)
        #expect(delta.encoded.count == v.format2_size && v.format2_size == v.size + 32)
        #expect(ContentID(hashing: delta.encoded).hex == v.format2_sha256)
        let decoded = try Delta.decode(hexBytes(v.format2_hex))
        #expect(decoded == delta)
        #expect(try decoded.apply(to: old).map(\.chunk.id) == new.map(\.chunk.id).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
    }

    @Test func givenAFormat2DeltaWithAnotherSetHash_whenApplied_thenStateRootMismatch() throws {
        let (v, old, _) = try fixture()
        var bytes = hexBytes(v.format2_hex)
        bytes[8 + 16 + 64] ^= 1  // the first byte of to_set_hash
        let delta = try Delta.decode(bytes)
        #expect(coreError { _ = try delta.apply(to: old) }?.code == .stateRootMismatch)
    }

    @Test func givenTheVectorBytes_whenDecodedAndApplied_thenTheNewVersionResults() throws {
        let (v, old, new) = try fixture()
        let delta = try Delta.decode(hexBytes(v.hex))
        #expect(delta.fromVersion == 1 && delta.toVersion == 2 && delta.dimension == 4)
        #expect(delta.encoded == hexBytes(v.hex))
        let applied = try delta.apply(to: old)
        #expect(applied.map(\.chunk.id) == new.map(\.chunk.id).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
        #expect(StateRoot.compute(chunks: applied).hex == v.to_state_root)
    }

    @Test func givenTheWrongBase_whenApplied_thenStateRootMismatch() throws {
        let (v, old, _) = try fixture()
        let delta = try Delta.decode(hexBytes(v.hex))
        #expect(coreError { _ = try delta.apply(to: Array(old.dropLast())) }?.code == .stateRootMismatch)
    }

    @Test func givenEveryTruncation_whenDecoded_thenDeltaMalformedAndNoCrash() throws {
        let vectors = try fixture().vectors
        for bytes in [hexBytes(vectors.hex), hexBytes(vectors.format2_hex)] {
            for length in 0..<bytes.count {
                #expect(coreError { _ = try Delta.decode(Array(bytes[..<length])) }?.code == .deltaMalformed, "prefix \(length)")
            }
            #expect(coreError { _ = try Delta.decode(bytes + [0]) }?.code == .deltaMalformed, "trailing byte")
        }
        var unknown = hexBytes(vectors.format2_hex)
        unknown[7] = UInt8(ascii: "3")
        #expect(coreError { _ = try Delta.decode(unknown) }?.code == .deltaMalformed, "format 3")
    }

    @Test func givenRandomMutations_whenDecoded_thenNeverCrashesAndEachRefusalIsDeltaMalformed() throws {
        let bytes = hexBytes(try fixture().vectors.hex)
        // Seeded: a failure names its round, and the same seed gives it again.
        var random = SplitMix64(seed: 0xDE17A)
        for round in 0..<5_000 {
            var mutated = bytes
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                mutated[Int.random(in: 0..<mutated.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            }
            do { _ = try Delta.decode(mutated) } catch {
                #expect(error.code == .deltaMalformed, "round \(round): \(error)")
            }
        }
    }

    /// The vector with the little-endian u32 at `offset` replaced by `value`.
    func patched(_ offset: Int, _ value: UInt32) throws -> [UInt8] {
        var bytes = hexBytes(try fixture().vectors.hex)
        for i in 0..<4 { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt32(i))) }
        return bytes
    }

    @Test(arguments: [(88, UInt32.max), (92, UInt32.max), (96, UInt32.max), (88, 0), (92, 1 << 31), (100, UInt32.max)])
    func givenHugeOrBadDeclaredSizes_whenDecoded_thenDeltaMalformedBeforeReadingPastThem(offset: Int, value: UInt32) throws {
        // 88: dimension, 92: upsert_count, 96: delete_count, 100: first id length.
        let bytes = try patched(offset, value)
        let error = coreError { _ = try Delta.decode(bytes) }
        #expect(error?.code == .deltaMalformed)
        // Refused by the check on the declared size itself, not by running out of bytes after
        // reading (or reserving for) what it declares: the error names the offset where decoding
        // stopped, which is the end of the header (100) or of the first id's length (104).
        let stopped = error?.message.split(separator: " ").last.flatMap { Int($0) }
        #expect(stopped.map { $0 <= 104 } == true, "\(error?.message ?? "no error")")
    }

    /// Delta bytes written field by field, bypassing `Delta.init`'s checks.
    func raw(upserts: [ChunkRecord], deletes: [String], dimension: UInt32 = 4) -> [UInt8] {
        var w = ByteWriter()
        w.bytes = Delta.magic
        w.u64(1); w.u64(2)
        w.bytes += [UInt8](repeating: 0, count: 64)
        w.u32(dimension); w.u32(UInt32(upserts.count)); w.u32(UInt32(deletes.count))
        for record in upserts { w.bytes += Delta.encodedUpsert(record) }
        for id in deletes { w.string(id) }
        return w.bytes
    }

    @Test func givenRawBytesFromTheHelper_whenDecoded_thenTheyAreAccepted() throws {
        let (_, old, _) = try fixture()
        #expect(try Delta.decode(raw(upserts: [old[1], old[0]], deletes: ["zz"])).upserts.count == 2)
    }

    @Test func givenInconsistentContent_whenDecoded_thenDeltaMalformed() throws {
        let (v, old, _) = try fixture()
        let sorted = [old[1], old[0]]  // flood-002 < water-001
        #expect(coreError { _ = try Delta.decode(raw(upserts: [old[0]], deletes: [old[0].chunk.id])) }?.message.contains("both") == true)
        #expect(coreError { _ = try Delta.decode(raw(upserts: sorted.reversed(), deletes: [])) }?.code == .deltaMalformed, "unsorted")
        #expect(coreError { _ = try Delta.decode(raw(upserts: [], deletes: ["a", "a"])) }?.code == .deltaMalformed, "repeated")
        #expect(coreError { _ = try Delta.decode(raw(upserts: [], deletes: [""])) }?.code == .deltaMalformed, "empty id")
        var nan = old[0]
        nan.vector[0] = .nan
        #expect(coreError { _ = try Delta.decode(raw(upserts: [nan], deletes: [])) }?.code == .deltaMalformed, "NaN")
        #expect(coreError { _ = try Delta.decode(raw(upserts: [old[0]], deletes: [], dimension: 3)) }?.code == .deltaMalformed)
        var badUTF8 = raw(upserts: [], deletes: ["ab"])
        badUTF8[badUTF8.count - 1] = 0xFF
        #expect(coreError { _ = try Delta.decode(badUTF8) }?.message.contains("UTF-8") == true)
        var badFlag = raw(upserts: [old[0]], deletes: [])
        let chunk = old[0].chunk
        badFlag[100 + 12 + chunk.id.utf8.count + chunk.title.utf8.count + chunk.content.utf8.count] = 2
        #expect(coreError { _ = try Delta.decode(badFlag) }?.message.contains("flag") == true)
        var badMagic = hexBytes(v.hex)
        badMagic[7] = UInt8(ascii: "9")
        #expect(coreError { _ = try Delta.decode(badMagic) }?.message.contains("magic") == true)
    }

    @Test func givenBadArguments_whenBuilt_thenInvalidArgument() throws {
        let (_, old, _) = try fixture()
        #expect(coreError { _ = try Delta.between(old: old, new: old + [old[0]], fromVersion: 1, toVersion: 2, dimension: 4) }?.code == .invalidArgument)
        #expect(coreError { _ = try Delta.between(old: old, new: old, fromVersion: 2, toVersion: 2, dimension: 4) }?.code == .invalidArgument)
        #expect(coreError { _ = try Delta.between(old: [], new: old, fromVersion: 1, toVersion: 2, dimension: 3) }?.code == .invalidArgument)
    }

    @Test func givenIdenticalVersions_whenDiffed_thenTheDeltaIsEmpty() throws {
        let (_, old, _) = try fixture()
        let delta = try Delta.between(old: old, new: old.reversed(), fromVersion: 1, toVersion: 2, dimension: 4)
        #expect(delta.upserts.isEmpty && delta.deletes.isEmpty && delta.fromStateRoot == delta.toStateRoot)
        #expect(try Delta.decode(delta.encoded) == delta)
    }
}
