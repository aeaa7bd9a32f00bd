import CairnTestSupport
import CairnCore
import Foundation
import Testing
@testable import CairnPublish

@Suite("Markdown and text chunking")
struct ChunkingTests {
    /// `count` distinct words w0 w1 …, so positions can be read back from the text.
    static func words(_ range: Range<Int>) -> String { range.map { "w\($0)" }.joined(separator: " ") }

    @Test("Given a long Markdown file, when chunked twice, then the ids are the same path#n and the chunks overlap by the configured words")
    func stableIDsAndOverlap() throws {
        let text = "# Water safety\n\n" + Self.words(0..<100) + "\n\n" + Self.words(100..<250) + "\n"
        let chunker = TextChunker(options: ChunkingOptions(targetWords: 80, overlapWords: 10))
        let first = chunker.chunks(of: text, path: "guides/water.md")
        let second = chunker.chunks(of: text, path: "guides/water.md")
        #expect(first == second)
        #expect(first.map(\.id) == (1...first.count).map { "guides/water.md#\($0)" })
        #expect(first.allSatisfy { $0.title == "Water safety" && $0.source == "guides/water.md" })
        for (a, b) in zip(first, first.dropFirst()) {
            let tail = a.content.split(whereSeparator: \.isWhitespace).suffix(10)
            let head = b.content.split(whereSeparator: \.isWhitespace).prefix(10)
            #expect(Array(tail) == Array(head))
        }
        #expect(first.allSatisfy { $0.content.split(whereSeparator: \.isWhitespace).count <= 80 })
        let all = Set(first.flatMap { $0.content.split(whereSeparator: \.isWhitespace).map(String.init) })
        #expect(all.isSuperset(of: (0..<250).map { "w\($0)" }))
    }

    @Test("Given paragraphs that fit, when chunked, then a chunk ends at a paragraph break rather than mid-paragraph")
    func paragraphAware() {
        let text = Self.words(0..<60) + "\n\n" + Self.words(60..<120) + "\n"
        let chunks = TextChunker(options: ChunkingOptions(targetWords: 100, overlapWords: 0)).chunks(of: text, path: "notes.txt")
        #expect(chunks.count == 2)
        #expect(chunks[0].content == Self.words(0..<60))
        #expect(chunks[1].content == Self.words(60..<120))
        #expect(chunks[0].title == "notes")
    }

    @Test("Given a Markdown file with headings, when chunked, then the first heading is the title and heading marks are not content")
    func headings() {
        let text = "Intro line\n\n## First aid ##\n\nPress firmly.\n\n### Later\n\nMore."
        let chunks = TextChunker().chunks(of: text, path: "aid.markdown")
        #expect(chunks.count == 1)
        #expect(chunks[0].title == "First aid")
        #expect(chunks[0].content == "Intro line\n\nFirst aid\n\nPress firmly.\n\nLater\n\nMore.")
    }

    @Test("Given a folder of mixed files, when read, then files are walked sorted, dotfiles skipped, each by its kind")
    func folderWalk() throws {
        let folder = try TemporaryDirectory.make()
        try FileManager.default.createDirectory(atPath: folder + "/b/.hidden", withIntermediateDirectories: true)
        try "# B\n\nbee text".write(toFile: folder + "/b/page.md", atomically: true, encoding: .utf8)
        try "ignored".write(toFile: folder + "/b/.hidden/x.md", atomically: true, encoding: .utf8)
        try "ignored".write(toFile: folder + "/.dot.txt", atomically: true, encoding: .utf8)
        try "not read".write(toFile: folder + "/image.png", atomically: true, encoding: .utf8)
        try #"{"_id":"d1","title":"T","text":"beir text"}"#.write(toFile: folder + "/a.jsonl", atomically: true, encoding: .utf8)
        try "plain".write(toFile: folder + "/c.txt", atomically: true, encoding: .utf8)
        let chunks = try SourceReader.read(path: folder)
        #expect(chunks.map(\.id) == ["d1", "b/page.md#1", "c.txt#1"])
        #expect(chunks[0].content == "beir text")
    }
}
