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

    @Test("Given a Markdown file with headings, when chunked, then the first heading is the title and heading marks are not content, a word's own # (C#) excepted")
    func headings() {
        let text = "Intro line\n\n## First aid ##\n\nPress firmly.\n\n### Later\n\nMore."
        let chunks = TextChunker().chunks(of: text, path: "aid.markdown")
        #expect(chunks.count == 1)
        #expect(chunks[0].title == "First aid")
        #expect(chunks[0].content == "Intro line\n\nFirst aid\n\nPress firmly.\n\nLater\n\nMore.")
        // A closing run of # only after a space (CommonMark): a `#` that ends a word stays.
        let sharp = TextChunker().chunks(of: "# Learn C#\n\nLINQ in F#.\n\n## Tabs\t##\n\nText.", path: "c.md")
        #expect(sharp.first?.title == "Learn C#" && sharp.first?.content == "Learn C#\n\nLINQ in F#.\n\nTabs\n\nText.", "\(sharp)")
    }

    @Test("Given Markdown sections of 100 words each under their headings, when chunked into windows of 180 words, then a chunk ends before a heading (before the first of headings in a row), not after it, and the next one starts with it")
    func headingStaysWithItsSection() {
        let words = { (prefix: String) in (1...100).map { "\(prefix)\($0)" }.joined(separator: " ") }
        let text = "# Alpha\n\n" + words("a") + "\n\n# Beta\n\n" + words("b")
        let chunks = TextChunker(options: ChunkingOptions(targetWords: 180, overlapWords: 0)).chunks(of: text, path: "s.md")
        // Until 2026-12-07 the first ended "… a100\n\nBeta" and the second began "b1 …".
        #expect(chunks.count == 2 && chunks[0].content.hasSuffix("a100") && chunks[1].content.hasPrefix("Beta\n\nb1 "),
                "\(chunks.map { ($0.content.prefix(12), $0.content.suffix(12)) })")
        // Headings in a row: the cut comes before the first of them, not between them.
        let nested = "# Alpha\n\n" + words("a") + "\n\n## Install\n\n### Linux\n\n" + words("b")
        let parts = TextChunker(options: ChunkingOptions(targetWords: 180, overlapWords: 0)).chunks(of: nested, path: "s.md")
        #expect(parts.count == 2 && parts[0].content.hasSuffix("a100") && parts[1].content.hasPrefix("Install\n\nLinux\n\nb1 "),
                "\(parts.map { ($0.content.prefix(20), $0.content.suffix(12)) })")
        // A heading just before the window's middle, followed by a long paragraph: no break in
        // the second half but the one right after the heading, which is not taken.
        let late = words("a").split(separator: " ").prefix(86).joined(separator: " ") + "\n\n# One two three four five six\n\n"
            + (1...200).map { "c\($0)" }.joined(separator: " ")
        let cut = TextChunker(options: ChunkingOptions(targetWords: 180, overlapWords: 0)).chunks(of: late, path: "l.md")
        #expect(!(cut.first?.content.hasSuffix("six") ?? true), "\(cut.map { $0.content.suffix(16) })")
        // A file of headings alone (an outline): cut between two of them, not within one.
        let outline = (1...60).map { "## Step \($0) of the long plan here" }.joined(separator: "\n\n")
        let steps = TextChunker(options: ChunkingOptions(targetWords: 180, overlapWords: 0)).chunks(of: outline, path: "o.md")
        #expect(steps.count > 1 && steps.allSatisfy { $0.content.hasPrefix("Step ") && $0.content.hasSuffix(" here") },
                "\(steps.map { ($0.content.prefix(14), $0.content.suffix(14)) })")
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

    @Test("Given a folder whose subfolders repeat the source's own path, a symlink to a file and one to a folder, when read, then every file is found under its true relative path, the linked file is read and the linked folder is not walked")
    func folderWalkRepeatedRoot() throws {
        let folder = try TemporaryDirectory.make()
        // The source is FOLDER/kb; a file lies at FOLDER/kb/guides/FOLDER/kb/deep.md.
        let root = folder + "/kb"
        let nested = root + "/guides" + root
        try FileManager.default.createDirectory(atPath: nested, withIntermediateDirectories: true)
        try "deep text".write(toFile: nested + "/deep.md", atomically: true, encoding: .utf8)
        try "top text".write(toFile: root + "/top.md", atomically: true, encoding: .utf8)
        let outside = folder + "/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try "outside text".write(toFile: outside + "/o.md", atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: root + "/linked.md", withDestinationPath: outside + "/o.md")
        try FileManager.default.createSymbolicLink(atPath: root + "/linked-folder", withDestinationPath: outside)
        let chunks = try SourceReader.read(path: root)
        #expect(chunks.map(\.id) == ["guides\(root)/deep.md#1", "linked.md#1", "top.md#1"])
        #expect(chunks.map(\.content) == ["deep text", "outside text", "top text"])
        // The same through a path given with a trailing slash.
        #expect(try SourceReader.read(path: root + "/").map(\.id) == chunks.map(\.id))
    }

    @Test("Given a link to a file that cannot be reached (a share not mounted) or a file name that is not UTF-8, when read, then the publish is refused naming it, not published without its chunks; a dangling link, a dot file or a file of another kind the reader would not read anyway is passed over whatever its name, and a folder whose name is not UTF-8 is refused")
    func unreachableLinkAndBadName() throws {
        let folder = try TemporaryDirectory.make()
        try "top text".write(toFile: folder + "/top.md", atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: folder + "/notes.bin", withDestinationPath: "/nonexistent/notes.bin")
        #expect(try SourceReader.read(path: folder).map(\.id) == ["top.md#1"])
        try FileManager.default.createSymbolicLink(atPath: folder + "/guide.md", withDestinationPath: "/nonexistent/share/guide.md")
        #expect { try SourceReader.read(path: folder) } throws: { error in
            (error as? PublishError)?.code == .io && (error as? PublishError)?.message.contains("guide.md") == true
        }
        unlink(folder + "/guide.md")
        func create(_ name: [UInt8]) {
            let fd = open((Array((folder + "/").utf8) + name).map { CChar(bitPattern: $0) } + [0], O_CREAT | O_WRONLY, 0o644)
            #expect(fd >= 0)
            close(fd)
        }
        // Names in Latin-1, as an archive made on Windows unpacks them: a slide deck and an
        // office lock file beside the knowledge base are not read, so their names do not matter.
        create(Array("Pr".utf8) + [0xE4] + Array("sentation.pdf".utf8))
        create(Array(".~lock.caf".utf8) + [0xE9] + Array(".md#".utf8))
        #expect(try SourceReader.read(path: folder).map(\.id) == ["top.md#1"])
        // A folder is walked: its name must read.
        let latin1Folder = (Array((folder + "/r").utf8) + [0xE9] + Array("sum".utf8)).map { CChar(bitPattern: $0) } + [0]
        #expect(mkdir(latin1Folder, 0o755) == 0)
        #expect { try SourceReader.read(path: folder) } throws: { error in
            (error as? PublishError)?.code == .badInput && (error as? PublishError)?.message.contains("not UTF-8") == true
        }
        #expect(rmdir(latin1Folder) == 0)
        // "café.md" in Latin-1 would be read.
        create(Array("caf".utf8) + [0xE9] + Array(".md".utf8))
        #expect { try SourceReader.read(path: folder) } throws: { error in
            (error as? PublishError)?.code == .badInput && (error as? PublishError)?.message.contains("not UTF-8") == true
        }
    }

    @Test("Given Markdown, JSON and JSON Lines files that start with a UTF-8 byte order mark, when read, then no chunk's title or text holds it and the records parse")
    func byteOrderMark() throws {
        let folder = try TemporaryDirectory.make()
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        try Data(bom + Array("# Water\n\nBoil it.".utf8)).write(to: URL(fileURLWithPath: folder + "/a.md"))
        try Data(bom + Array(#"[{"id":"j1","title":"J","content":"json text"}]"#.utf8)).write(to: URL(fileURLWithPath: folder + "/b.json"))
        try Data(bom + Array("{\"_id\":\"l1\",\"text\":\"line text\"}\n".utf8)).write(to: URL(fileURLWithPath: folder + "/c.jsonl"))
        let chunks = try SourceReader.read(path: folder)
        #expect(chunks.map(\.id) == ["a.md#1", "j1", "l1"])
        #expect(!chunks.contains { $0.title.unicodeScalars.first == "\u{FEFF}" || $0.content.unicodeScalars.first == "\u{FEFF}" })
        #expect(chunks.first?.title == "Water")
    }

    @Test("Given Markdown with a shell comment in a fenced code block, a four-space-indented '#', front matter and HTML comments, when chunked, then the title is the front matter's, no comment or front-matter text is content, and the code's lines are text, not headings")
    func markdownStructure() {
        let text = """
            ---
            title: "Purifying water"
            date: 2024-05-01
            ---
            <!-- draft: check the dose with the health office -->
            Boil water for one minute.

            ```bash
            # install the filter service
            systemctl enable filter
            ```

                # indented, so code

            ~~~~
            ## still code
            ~~~
            ~~~~
            <!-- a comment
            over two lines --> Keep it covered.
            """
        let chunk = TextChunker().chunks(of: text, path: "water.md")
        #expect(chunk.count == 1)
        #expect(chunk.first?.title == "Purifying water")
        let content = chunk.first?.content ?? ""
        #expect(!content.contains("draft") && !content.contains("date:") && !content.contains("comment") && !content.contains("---"), "\(content)")
        #expect(content.contains("# install the filter service systemctl enable filter"), "\(content)")
        #expect(content.contains("# indented, so code") && content.contains("## still code"), "\(content)")
        #expect(content.hasPrefix("Boil water for one minute.") && content.hasSuffix("Keep it covered."), "\(content)")

        // Without front matter or a heading outside code, the title is the file's name.
        let code = TextChunker().chunks(of: "```\n# not a title\n```\nText.", path: "notes/setup.md")
        #expect(code.first?.title == "setup")
        // A '---' that never closes is text, not front matter.
        #expect(TextChunker().chunks(of: "---\ntitle: x\nBody.", path: "a.md").first?.content == "--- title: x Body.")
    }

    @Test("Given Markdown with `<!--` in a code span, a stray `<!-- TODO` that nothing closes, and a thematic break `---` on the first line, when chunked, then each is text and nothing after it is lost; a real comment after the code span is still left out")
    func commentsThatAreText() {
        let span = TextChunker().chunks(of: "Use `<!--` to open a comment.\n\n<!-- reviewer: check -->\nMore text.", path: "html.md")
        #expect(span.first?.content == "Use `<!--` to open a comment.\n\nMore text.", "\(span.map(\.content))")
        let stray = TextChunker().chunks(of: "Boil water.\n\n<!-- TODO dose\n\nKeep it covered.", path: "todo.md")
        #expect(stray.first?.content == "Boil water.\n\n<!-- TODO dose\n\nKeep it covered.", "\(stray.map(\.content))")
        let rule = TextChunker().chunks(of: "---\nBoil water for one minute.\n---\nKeep it covered.", path: "rule.md")
        #expect(rule.first?.content == "--- Boil water for one minute. --- Keep it covered.", "\(rule.map(\.content))")
        #expect(rule.first?.title == "rule")
        // A `-->` in a fenced block closes no comment: the prose `<!--` before it is text, the
        // fence is code, and the heading after it is the title.
        let fenced = TextChunker().chunks(of: "Type <!-- to open a comment.\n\n```html\n<!-- note -->\n```\n\n## Boiling\nBoil water.", path: "f.md")
        #expect(fenced.first?.content == "Type <!-- to open a comment.\n\n<!-- note -->\n\nBoiling\n\nBoil water.", "\(fenced.map(\.content))")
        #expect(fenced.first?.title == "Boiling")
        // A comment opened on a line of its own hides what it holds, a fence included, to its
        // `-->`; one inside a paragraph, only to a `-->` in that paragraph.
        let cut = TextChunker().chunks(of: "Intro.\n<!--\n~~~ old example, cut\n-->\n# Real heading\nBody.", path: "c.md")
        #expect(cut.first?.content == "Intro.\n\nReal heading\n\nBody." && cut.first?.title == "Real heading", "\(cut)")
        let inline = TextChunker().chunks(of: "Boil <!-- check\nthe dose --> water.\n\nType <!-- to open.\n\nA real <!-- note --> end.", path: "i.md")
        #expect(inline.first?.content == "Boil water.\n\nType <!-- to open.\n\nA real end.", "\(inline.map(\.content))")
        // A fence or a heading ends a paragraph: a `-->` past it closes no `<!--` before it.
        let fenceAfter = TextChunker().chunks(of: "Write a comment <!-- like so:\n```html\n<!-- hidden -->\n```\n## Next\nText.", path: "w.md")
        #expect(fenceAfter.first?.content == "Write a comment <!-- like so:\n\n<!-- hidden -->\n\nNext\n\nText." && fenceAfter.first?.title == "Next",
                "\(fenceAfter)")
        // Lines of `<!--` that nothing closes are text, every one.
        let open = TextChunker().chunks(of: String(repeating: "<!--\n", count: 2_000) + "End.", path: "o.md")
        #expect(open.flatMap { $0.content.split(whereSeparator: \.isWhitespace) }.filter { $0 == "<!--" }.count >= 2_000)
        // Prose between two `---` lines is not front matter, whatever it starts with.
        let update = TextChunker().chunks(of: "---\n**Update:** this page moved.\n---\nText.", path: "u.md")
        #expect(update.first?.content == "--- **Update:** this page moved. --- Text.", "\(update.map(\.content))")
        // Front matter whose first line is a YAML comment, or whose key is quoted, is front matter.
        for head in ["# Hugo page settings\ntitle: Water", "\"title\": Water", "og.title: Water\ntitle: Water"] {
            let page = TextChunker().chunks(of: "---\n\(head)\ndraft: true\n---\nBody.", path: "p.md")
            #expect(page.first?.title == "Water" && page.first?.content == "Body.", "\(page)")
        }
    }

    @Test("Given text whose paragraph breaks fall just past each window's half and an overlap of half a window, when chunked, then each chunk starts at least a quarter window after the last, so the chunk count stays near words / quarter window")
    func progressUnderLargeOverlap() {
        // Paragraphs of 51 words: with 100-word windows, every cut is at the first break past 50.
        let text = (0..<40).map { Self.words($0 * 51..<($0 + 1) * 51) }.joined(separator: "\n\n")
        let chunks = TextChunker(options: ChunkingOptions(targetWords: 100, overlapWords: 50)).chunks(of: text, path: "p.txt")
        let starts = chunks.map { Int($0.content.prefix { $0 != " " }.dropFirst()) ?? -1 }
        #expect(zip(starts, starts.dropFirst()).allSatisfy { $1 - $0 >= 25 }, "\(starts)")
        #expect(chunks.count <= 40 * 51 / 25 + 1)
        // An overlap above half a window is taken as half.
        #expect(ChunkingOptions(targetWords: 100, overlapWords: 99).overlapWords == 50)
    }

    @Test("Given Markdown holding a data: URI image of 40 KB, when chunked, then the chunk holds the text around it and not the data")
    func embeddedDataDropped() {
        let data = "![map](data:image/png;base64," + String(repeating: "iVBORw0KGgo", count: 4_000) + ")"
        let chunks = TextChunker().chunks(of: "Evacuation routes: \(data) follow the blue signs.", path: "routes.md")
        #expect(chunks.map(\.content) == ["Evacuation routes: follow the blue signs."])
        let url = "https://example.org/" + String(repeating: "a", count: 300)
        #expect(TextChunker().chunks(of: "See \(url) for more.", path: "u.md").first?.content == "See \(url) for more.")
    }

    @Test("Given Chinese and Japanese paragraphs written without spaces (each past 1,000 bytes), an English word inside one, when chunked, then every character is in a chunk in its order, a chunk holds at most the target's words counting each character as one, the text gains no spaces, and the overlap is counted in characters")
    func textWithoutSpaces() throws {
        let han = Array("水源消毒煮沸饮用安全储存容器清洁避免污染"), kana = Array("みずをふっとうさせてからのんでください")
        let chinese = String((0..<700).map { $0 % 25 == 24 ? "。" : han[$0 % han.count] })
        let japanese = String((0..<400).map { kana[$0 % kana.count] })
        let body = chinese + "加chlorine片" + chinese
        let text = "# 饮用水\n\n" + body + "\n\n" + japanese + "\n"
        // Without overlap the chunks are the text cut in pieces: 1,806 words (3 + 1,403 + 400),
        // 180 a chunk, the eighth cut short at the Japanese paragraph: 11 chunks.
        let pieces = TextChunker(options: ChunkingOptions(targetWords: 180, overlapWords: 0)).chunks(of: text, path: "water.md")
        #expect(pieces.count == 11, "\(pieces.map(\.content.count))")
        // (Compared to a Bool: the test library prints nothing for operands this long.)
        let whole = pieces.map(\.content).joined() == "饮用水\n\n" + body + japanese
        #expect(whole, "the chunks, in order, are not the text")
        #expect(pieces.allSatisfy { !$0.content.contains(" ") && $0.content.count <= 180 + "chlorine".count - 1 })
        #expect(pieces.first?.title == "饮用水")
        // With an overlap of 30, the next chunk starts with the last 30 characters of this one.
        let chunks = TextChunker(options: ChunkingOptions(targetWords: 180, overlapWords: 30)).chunks(of: text, path: "water.md")
        try #require(chunks.count > 11)
        #expect(chunks.contains { $0.content.contains("加chlorine片") })
        #expect(String(chunks[1].content.prefix(30)) == String(chunks[0].content.suffix(30)))
        // A word over 1,000 bytes of anything else is still data, not text, and what follows it
        // is not glued to the word before.
        let map = TextChunker().chunks(of: "看 " + String(repeating: "Ab0+", count: 300) + "地图", path: "m.md")
        #expect(map.map(\.content) == ["看 地图"])
        // Wrapped inside a paragraph, a line of Chinese goes on without a space; a new
        // paragraph, or an English word, keeps its break.
        let wrapped = TextChunker().chunks(of: "把水烧开\n一分钟后饮用\nthen\n静置\n\n消毒", path: "w.md")
        #expect(wrapped.map(\.content) == ["把水烧开一分钟后饮用 then 静置\n\n消毒"])
    }

    @Test("Given a file whose name is in NFD (as macOS writes it), when read, then its chunks' ids and source name it in NFC")
    func idsInNFC() throws {
        let folder = try TemporaryDirectory.make()
        let decomposed = "Cafe\u{301}.md"
        try "Coffee and water.".write(toFile: folder + "/" + decomposed, atomically: true, encoding: .utf8)
        let chunk = try #require(try SourceReader.read(path: folder).first)
        #expect(Array(chunk.id.unicodeScalars) == Array("Caf\u{E9}.md#1".unicodeScalars))
        #expect(Array((chunk.source ?? "").unicodeScalars) == Array("Caf\u{E9}.md".unicodeScalars))
    }
}
