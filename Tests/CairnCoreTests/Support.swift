import Foundation
import Testing
@testable import CairnCore

/// Reads a file under `protocol/` relative to this source file, so the tests check the
/// published vectors rather than copies of them.
func protocolFile(_ path: String) throws -> [UInt8] {
    let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return Array(try Data(contentsOf: root.appendingPathComponent("protocol").appendingPathComponent(path)))
}

/// Decodes a vector file with Foundation's decoder, independent of the parser under test.
func vector<T: Decodable>(_ type: T.Type, _ name: String) throws -> T {
    try JSONDecoder().decode(T.self, from: Data(try protocolFile("vectors/" + name)))
}

/// Runs `body` and returns the `CoreError` it throws, recording an issue if it throws nothing.
func coreError(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> CoreError? {
    do {
        try body()
        Issue.record("expected a CoreError, got success", sourceLocation: sourceLocation)
    } catch let error as CoreError {
        return error
    } catch {
        Issue.record("expected a CoreError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// A chunk record as the vector files spell it.
struct VectorChunk: Decodable {
    var id: String
    var title: String
    var content: String
    var scenario: String?
    var tags: [String]
    var source: String?
    var vector_f32le_hex: String

    var record: ChunkRecord {
        let bytes = hexBytes(vector_f32le_hex)
        let vector = stride(from: 0, to: bytes.count, by: 4).map { i in
            Float(bitPattern: UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24)
        }
        return ChunkRecord(chunk: Chunk(id: id, title: title, content: content, scenario: scenario, tags: tags, source: source),
                           vector: vector)
    }
}

func hexBytes(_ hex: String) -> [UInt8] {
    let utf8 = Array(hex.utf8)
    return stride(from: 0, to: utf8.count, by: 2).map { UInt8(String(decoding: utf8[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
}

func hexString(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

/// The test publisher key of protocol/vectors (seed 0x01…0x20). TEST ONLY.
func testPublisherKey() throws -> PublisherKey {
    try PublisherKey(fileText: String(decoding: try protocolFile("vectors/publisher.key"), as: UTF8.self))
}

/// Signs an arbitrary JSON value as a manifest, to build files the encoder would never write.
func signRaw(_ manifest: CanonicalJSON, with key: PublisherKey) -> [UInt8] {
    let signature = key.sign(SignedManifest.signedBytes(manifest))
    let entry = CanonicalJSON.object(["key_id": .string(key.keyID.hex), "algorithm": .string("ed25519"),
                                      "signature": .string(Base64.encode(signature))])
    return CanonicalJSON.object(["manifest": manifest, "signatures": .array([entry])]).bytes + [0x0A]
}
