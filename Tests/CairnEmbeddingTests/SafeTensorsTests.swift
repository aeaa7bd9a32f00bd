import CairnTestSupport
import Foundation
import Testing
@testable import CairnEmbedding

@Suite("safetensors reader")
struct SafeTensorsTests {
    func write(_ bytes: Data) throws -> String {
        let path = try TemporaryDirectory.make() + "/model.safetensors"
        try bytes.write(to: URL(fileURLWithPath: path))
        return path
    }

    func code(of body: () throws -> Void) -> EmbeddingError.Code? {
        do {
            try body()
            return nil
        } catch let error as EmbeddingError {
            return error.code
        } catch {
            return nil
        }
    }

    @Test("Given a valid file, when reading a tensor, then shape, dtype and values round-trip")
    func readsTensors() throws {
        let model = TinyModel(seed: 5)
        let file = try SafeTensors(path: try write(model.safetensorsBytes))
        let name = "encoder.layer.1.intermediate.dense.weight"
        #expect(file.tensors[name]?.shape == [16, 8])
        #expect(try file.tensor(name, shape: [16, 8]).floats == model.tensor(name))
    }

    @Test("Given an aligned tensor, when the encoder takes it, then it reads the file's mapping in place, open while the view lives")
    func alignedTensorsAreReadInPlace() throws {
        let model = TinyModel(seed: 5)
        let name = "encoder.layer.1.intermediate.dense.weight"
        // The file object is gone after the closure: only the views hold the mapping.
        let (first, second) = try { () throws -> (TensorFloats, TensorFloats) in
            let file = try SafeTensors(path: try write(model.safetensorsBytes))
            return (try file.tensor(name, shape: [16, 8]), try file.tensor(name, shape: [16, 8]))
        }()
        #expect(first.base == second.base, "two views of one tensor are the same bytes, not two copies")
        #expect(first.floats == model.tensor(name))
    }

    @Test("Given a tensor at an offset unaligned for Float, when the encoder takes it, then it gets a copy of the right values")
    func unalignedTensorsAreCopied() throws {
        let values: [Float] = [1.5, -2.25, 3, 1e-3, 7]
        // "a" starts one byte into the data: its floats straddle the stored ones.
        let header: [String: Any] = ["a": ["dtype": "F32", "shape": [4], "data_offsets": [1, 17]]]
        let bytes = TinyModel.safetensors(header: header, data: values)
        let dataStart = bytes.count - values.count * 4
        let expected = (0..<4).map { index in
            bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: dataStart + 1 + 4 * index, as: Float.self) }
        }
        let file = try SafeTensors(path: try write(bytes))
        let (first, second) = (try file.tensor("a", shape: [4]), try file.tensor("a", shape: [4]))
        #expect(first.base != second.base)
        #expect(first.floats == expected)
    }

    @Test("Given a file cut short anywhere after its header, when opening, then it is reported truncated")
    func truncatedFilesAreRefused() throws {
        let bytes = TinyModel(seed: 5).safetensorsBytes
        let headerEnd = 8 + Int(bytes.prefix(8).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) })
        for cut in [0, 4, 7, 8, headerEnd - 1, headerEnd + 1, bytes.count / 2, bytes.count - 1] {
            let path = try write(bytes.prefix(cut))
            let found = code { _ = try SafeTensors(path: path) }
            #expect(found == .safetensorsTruncated,
                    "cut at \(cut): \(String(describing: found))")
        }
    }

    @Test("Given foreign files, when opening, then each is refused as not safetensors",
          arguments: ["PK\u{3}\u{4}zip-archive-bytes-here", "{\"not\": \"safetensors\"}", "\u{80}\u{2}cpickle...."])
    func foreignFilesAreRefused(prefix: String) throws {
        var bytes = Data(prefix.utf8)
        bytes.append(Data(repeating: 0x41, count: 64))
        let path = try write(bytes)
        let found = code { _ = try SafeTensors(path: path) }
        #expect(found == .safetensorsMalformed || found == .safetensorsTruncated)
    }

    @Test("Given a header that lies about sizes or overlaps, when opening, then it is refused as malformed")
    func inconsistentHeadersAreRefused() throws {
        let data = [Float](repeating: 1, count: 8)
        let cases: [[String: Any]] = [
            ["a": ["dtype": "F32", "shape": [3], "data_offsets": [0, 16]]],             // 3 floats ≠ 16 bytes
            ["a": ["dtype": "Q4", "shape": [4], "data_offsets": [0, 16]]],              // unknown dtype
            ["a": ["dtype": "F32", "shape": [4], "data_offsets": [0, 16]],
             "b": ["dtype": "F32", "shape": [4], "data_offsets": [8, 24]]],             // overlap
            ["a": ["dtype": "F32", "shape": [-1], "data_offsets": [0, 16]]],            // negative dim
            ["a": ["dtype": "F32", "shape": [4]]],                                       // no offsets
        ]
        for header in cases {
            let path = try write(TinyModel.safetensors(header: header, data: data))
            #expect(code { _ = try SafeTensors(path: path) } == .safetensorsMalformed, "\(header)")
        }
    }

    @Test("Given a tensor claiming Int.max bytes (cairn-fuzz safetensors), when opening, then it is reported truncated with its true end")
    func endPastIntMax() throws {
        let header: [String: Any] = ["a": ["dtype": "U8", "shape": [Int.max], "data_offsets": [0, Int.max]]]
        let path = try write(TinyModel.safetensors(header: header, data: []))
        // Its end used to be computed as header + offset: an overflow (a trap with checks on, a
        // negative byte number in this target's -Ounchecked build).
        #expect {
            _ = try SafeTensors(path: path)
        } throws: { error in
            guard let error = error as? EmbeddingError else { return false }
            return error.code == .safetensorsTruncated && error.message.contains("ends at data byte \(Int.max)")
        }
    }

    @Test("Given a tensor of another dtype or shape, when the encoder asks for F32 of its shape, then it is refused")
    func wrongDtypeOrShapeIsRefused() throws {
        let header: [String: Any] = ["half": ["dtype": "F16", "shape": [8], "data_offsets": [0, 16]],
                                     "flat": ["dtype": "F32", "shape": [4], "data_offsets": [16, 32]]]
        let file = try SafeTensors(path: try write(TinyModel.safetensors(header: header, data: [Float](repeating: 0, count: 8))))
        #expect(code { _ = try file.tensor("half", shape: [8]) } == .tensorMismatch)
        #expect(code { _ = try file.tensor("flat", shape: [2, 2]) } == .tensorMismatch)
        #expect(code { _ = try file.tensor("absent", shape: [4]) } == .tensorMissing)
    }

    @Test("Given no file, when opening, then the error says the model was not found")
    func missingFile() {
        #expect(code { _ = try SafeTensors(path: "/nonexistent/model.safetensors") } == .modelNotFound)
    }
}

extension TensorFloats {
    /// The floats, copied out.
    var floats: [Float] { withUnsafeBufferPointer { Array($0) } }
}
