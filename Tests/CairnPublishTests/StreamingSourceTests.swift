import CairnCore
import CairnIndex
import CairnTestSupport
import Foundation
import Testing
@testable import CairnPublish

/// A publish streams its source: `.jsonl` is read a line at a time from blocks of a megabyte,
/// and the snapshot writer stages rows without holding them.
@Suite("Streaming a source")
struct StreamingSourceTests {
    @Test("Given a JSONL file of 4 MB whose records straddle the read blocks, with blank lines and no final newline, when streamed, then every record comes once, in order, with its line number")
    func jsonlAcrossBlocks() throws {
        let folder = NSTemporaryDirectory() + "cairn-stream-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var lines: [String] = []
        for index in 0..<3_000 {
            // Records of 1.3–1.5 KB: some end exactly on, most across, the 1 MB block edges.
            let content = String(repeating: "word\(index % 97) ", count: 260 + index % 37)
            lines.append(#"{"id": "r\#(index)", "title": "Record \#(index)", "content": "\#(content)"}"#)
            if index % 500 == 7 { lines.append("   ") }
        }
        let path = folder + "/kb.jsonl"
        try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        #expect((try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0) > 4_000_000)

        var seen: [(String, String)] = []
        try SourceReader.forEachChunk(path: path) { (file, position, chunk) throws(PublishError) in
            #expect(file == path)
            seen.append((position, chunk.id))
        }
        #expect(seen.map(\.1) == (0..<3_000).map { "r\($0)" })
        // Positions are the file's line numbers, blank lines counted.
        let numbers = lines.enumerated().filter { !$0.element.allSatisfy(\.isWhitespace) }.map { $0.offset + 1 }
        #expect(seen.map(\.0) == zip(numbers, seen).map { "line \($0.0) (id \"\($0.1.1)\")" })
    }

    @Test("Given rows staged in any order, one of them repeating an id, when the stream finishes, then the file is the one `create` writes for the same rows, and the repeat is refused naming the first place")
    func streamEqualsCreate() throws {
        let folder = NSTemporaryDirectory() + "cairn-stream-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let entries: [ChunkRecord] = (0..<500).map { (index: Int) -> ChunkRecord in
            let scenario: String? = index % 3 == 0 ? "flood" : nil
            let tags: [String] = index % 5 == 0 ? ["a", "b"] : []
            let chunk = Chunk(id: "c\((index * 7919) % 500)", title: "T\(index)", content: "content \(index)", scenario: scenario, tags: tags)
            let scale = Float(index + 1)
            return ChunkRecord(chunk: chunk, vector: [Float(index) / scale, 1 / scale, 0, 0])
        }
        let meta = SnapshotMeta(channel: "c", version: 3, dimension: 4, modelID: "m", entries: entries)
        let created = folder + "/created.sqlite", streamed = folder + "/streamed.sqlite"
        try SnapshotWriter.create(at: created, meta: meta, entries: entries)
        let stream = try SnapshotWriter.Stream(at: streamed, dimension: 4)
        for (index, entry) in entries.reversed().enumerated() { try stream.add(entry.chunk, vector: entry.vector, origin: "row \(index)") }
        #expect(try stream.finish(channel: "c", version: 3, modelID: "m") == meta)
        #expect(FileManager.default.contents(atPath: created) == FileManager.default.contents(atPath: streamed))
        #expect(!FileManager.default.fileExists(atPath: streamed + "-staging"))

        let repeated = try SnapshotWriter.Stream(at: folder + "/repeated.sqlite", dimension: 4)
        try repeated.add(entries[0].chunk, vector: entries[0].vector, origin: "kb.jsonl line 1")
        #expect { try repeated.add(entries[0].chunk, vector: entries[1].vector, origin: "kb.jsonl line 9") } throws: { error in
            (error as? IndexError)?.code == .duplicateID && (error as? IndexError)?.message.contains("kb.jsonl line 1") == true
        }
    }
}
