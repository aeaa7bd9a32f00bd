import CairnCore
import Foundation
import Testing
@testable import CairnStore

/// `EncodedDelta` read in place from a mapped scratch file (`FileSystem.Mapping`), as a device
/// reads every delta it installs.
@Suite("A delta read in place from its mapped encoding")
struct EncodedDeltaTests {
    /// A delta of `count` upserts, every optional field present on some and absent on others, and
    /// a few deletes.
    static func delta(count: Int) throws -> Delta {
        let dimension = 8
        let upserts = (0..<count).map { index in
            ChunkRecord(chunk: Chunk(id: "chunk-\(index)", title: "Title \(index)",
                                     content: String(repeating: "water \(index) ", count: 1 + index % 5),
                                     scenario: index % 3 == 0 ? nil : "flood", tags: index % 2 == 0 ? [] : ["b", "a\(index % 4)"],
                                     source: index % 4 == 0 ? "manual.md" : nil),
                        vector: (0..<dimension).map { Float(index * dimension + $0) / 100 })
        }
        return try Delta(fromVersion: 3, toVersion: 4, fromStateRoot: ContentID(hashing: [1]), toStateRoot: ContentID(hashing: [2]),
                         dimension: dimension, upserts: upserts, deletes: ["gone-1", "gone-2"])
    }

    /// Runs `body` with a scratch path in a new temporary folder, removed afterwards.
    func withScratch(_ body: (_ folder: String, _ path: String) throws -> Void) throws {
        let folder = NSTemporaryDirectory() + "cairn-encoded-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try body(folder, folder + "/index.sqlite.delta")
    }

    @Test("Given a delta's encoding in a scratch file, when mapped and read, then it equals the decoded delta and the file is gone but mapped")
    func readInPlace() throws {
        let delta = try Self.delta(count: 300)
        try withScratch { folder, path in
            try FileSystem.writeNew(delta.encoded, to: path)
            let mapping = try FileSystem.Mapping(unlinking: path)
            let encoded = try EncodedDelta(mapping)
            #expect(encoded.fromVersion == 3 && encoded.toVersion == 4 && encoded.dimension == 8)
            #expect(encoded.fromStateRoot == delta.fromStateRoot && encoded.toStateRoot == delta.toStateRoot)
            #expect(encoded.deletes == delta.deletes)
            #expect(encoded.upserts.ids == delta.upserts.map(\.chunk.id))
            #expect(Array(encoded.upserts) == delta.upserts)
            // The vectors' length, told from the header without reading a record, as from values.
            #expect(encoded.upserts.vectorLength(otherThan: 8) == nil && encoded.upserts.vectorLength(otherThan: 4) == 8)
            #expect(ChunkRecords(delta.upserts).vectorLength(otherThan: 8) == nil && ChunkRecords(delta.upserts).vectorLength(otherThan: 4) == 8)
            // Read again, in another order: each read decodes the same bytes.
            #expect(encoded.upserts.reversed() == delta.upserts.reversed())
            // Unlinked at once, its pages a file's (the kernel can drop them), not anonymous memory.
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty)
            // (/proc/self/map_files names each mapping by its address range and links to its file.)
            let start = UInt(bitPattern: mapping.bytes.baseAddress)
            let page = UInt(sysconf(Int32(_SC_PAGESIZE)))
            let end = start + (UInt(mapping.bytes.count) + page - 1) / page * page
            let link = "/proc/self/map_files/\(String(start, radix: 16))-\(String(end, radix: 16))"
            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == "\(path) (deleted)")
            withExtendedLifetime(encoded) {}
        }
    }

    @Test("Given a damaged encoding, when mapped, then it is refused as Delta.decode refuses it, naming the byte offset")
    func refusesDamage() throws {
        let bytes = try Self.delta(count: 20).encoded
        let damaged: [(String, [UInt8])] = [
            ("cut short", Array(bytes.dropLast(3))),
            ("a trailing byte", bytes + [0]),
            // The first upsert's scenario flag, after its id, title and content.
            ("a bad flag", { var b = bytes; b[100 + (4 + 7) + (4 + 7) + (4 + 8)] = 9; return b }()),
        ]
        for (what, input) in damaged {
            try withScratch { _, path in
                try FileSystem.writeNew(input, to: path)
                let mapping = try FileSystem.Mapping(unlinking: path)
                var refusal: CoreError?
                do throws(CoreError) { _ = try EncodedDelta(mapping) } catch { refusal = error }
                #expect(refusal?.code == .deltaMalformed, "\(what)")
                #expect(refusal?.message.contains("byte offset") == true, "\(what)")
                #expect((try? Delta.decode(input)) == nil, "\(what)")
            }
        }
    }
}
