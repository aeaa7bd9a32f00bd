import CairnCore
@testable import CairnPublish
import CairnTestSupport
import Foundation
import Testing

@Suite("Bad input", .offCooperativePool)
struct BadInputTests {
    static let secret = "SECRET-DOCUMENT-TEXT"

    /// Reads `bytes` as a file named `name` and returns the refusal.
    static func refusal(_ name: String, _ bytes: [UInt8]) throws -> PublishError? {
        let folder = try TemporaryDirectory.make()
        let path = folder + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return #expect(throws: PublishError.self) { try SourceReader.read(path: path) }
    }

    static func refusal(_ name: String, _ text: String) throws -> PublishError? { try refusal(name, Array(text.utf8)) }

    @Test("Given bad records, when read, then one line names the file, the record and the problem, without document text",
          arguments: [
            ("kb.json", #"[{"id":"a","title":"t","content":"SECRET-DOCUMENT-TEXT"},{"id":"a","title":"t","content":"x"}]"#,
             #"index 1 (id "a"): duplicate id "a""#),
            ("kb.json", #"[{"id":"a","title":"t","content":"x"},{"id":"b","title":"SECRET-DOCUMENT-TEXT"}]"#,
             #"index 1 (id "b"): missing `content`"#),
            ("kb.jsonl", "{\"id\":\"a\",\"title\":\"t\",\"content\":\"x\"}\n{\"id\":\"b\",\"title\":\"t\",\"content\":\"SECRET-DOCUMENT-TEXT\",\"tags\":\"water\"}",
             #"line 2 (id "b"): `tags` must be an array of strings"#),
            ("kb.jsonl", "{\"id\":\"a\",\"title\":\"t\",\"content\":\"x\",\"tags\":[1]}", #"line 1 (id "a"): `tags` must be an array of strings"#),
            ("corpus.jsonl", "{\"_id\":\"d1\",\"text\":\"x\"}\n{\"title\":\"t\",\"text\":\"SECRET-DOCUMENT-TEXT\"}",
             "line 2: missing `_id`"),
            ("kb.json", #"[{"id":"a","title":"t","content":"x","colour":"SECRET-DOCUMENT-TEXT"}]"#, "unknown field `colour`"),
            ("kb.json", #"{"id":"a"}"#, "must be an array of records"),
            ("kb.json", #"[{"id":"a","title":"t","content":"SECRET-DOCUMENT-TEXT""#, "not valid JSON"),
            // Foundation keeps one of the two values silently: which id, which content?
            ("kb.jsonl", #"{"id":"a","id":"b","title":"t","content":"SECRET-DOCUMENT-TEXT"}"#, "line 1: an object names a key twice"),
            ("kb.json", #"[{"id":"a","title":"t","content":"x"},{"id":"b","title":"t","content":"x","content":"SECRET-DOCUMENT-TEXT"}]"#,
             "an object names a key twice"),
            // Named on its own, a file of no known kind is not chunked as text.
            ("kb.ndjson", #"{"id":"a","title":"t","content":"SECRET-DOCUMENT-TEXT"}"#, ".ndjson is none of .json, .jsonl, .markdown, .md, .txt"),
          ])
    func badRecords(name: String, text: String, expected: String) throws {
        let error = try #require(try Self.refusal(name, text))
        #expect(error.code == .badInput)
        #expect(error.message.contains(name))
        #expect(error.message.contains(expected), "\(error.message)")
        #expect(!error.message.contains(Self.secret))
        #expect(!error.message.contains("\n"))
    }

    @Test("Given a source read whole before the publish lock, when a file is rewritten once the lock is held (one chunk's text changed, the file cut short, a chunk added), then the publish is refused in one line saying the source changed, and nothing is published",
          arguments: ["changed", "cut short", "grown"])
    func sourceChangedWhilePublished(edit: String) throws {
        let workspace = try Workspace()
        let original = SampleKB.chunks(count: 30)
        let source = try workspace.writeSource(original)
        var edited = original
        switch edit {
        case "changed": edited[12].content = "Rewritten by an editor while the publish ran: boil water for three minutes."
        case "cut short": edited.removeLast(10)
        default: edited += SampleKB.chunks(count: 35).suffix(5)
        }
        let replacement = edited
        // The first pass reads the source before the lock; the edit lands once the lock is held.
        let publisher = Publisher(configuration: PublishConfiguration(repository: workspace.repo, channel: "stable", source: source),
                                  key: workspace.key, embedder: workspace.embedder, model: workspace.model, cache: nil,
                                  logger: .init(label: "test"), checkpoint: { stage in
            if stage == .locked { _ = try? workspace.writeSource(replacement) }
        })
        let error = #expect(throws: PublishError.self) { try publisher.publish() }
        let said = ["changed": "is not the one read at row 12 before the publish lock", "cut short": "20 chunks, where the check before the publish lock read 30",
                    "grown": "is past the 30 chunks read before the publish lock"][edit]!
        #expect(error?.code == .badInput && error?.message.contains(said) == true
                && error?.message.contains("the source changed while it was published; nothing was published") == true
                && error?.message.contains("\n") == false, "\(String(describing: error))")
        #expect(workspace.repository.versionNumbers("stable").isEmpty)
    }

    @Test("Given a JSON Lines source whose last line is bad (a field missing, or the first line's id again), when published without --vectors, then it is refused naming that line before the publish lock is taken, nothing embedded or written",
          arguments: [(#"{"id":"last","title":"t"}"#, "missing `content`"),
                      (#"{"id":"chunk-000","title":"t","content":"again"}"#, #"duplicate id "chunk-000""#)])
    func badRecordRefusedBeforeTheLock(last: String, problem: String) throws {
        let workspace = try Workspace()
        let good = SampleKB.chunks(count: 30).map { #"{"id":"\#($0.id)","title":"t","content":"\#($0.content)"}"# }
        let source = workspace.folder + "/kb.jsonl"
        try Data((good + [last]).joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: source))
        final class Stages: @unchecked Sendable {
            let lock = NSLock()
            var seen: [PublishStage] = []
        }
        let stages = Stages()
        let publisher = Publisher(configuration: PublishConfiguration(repository: workspace.repo, channel: "stable", source: source),
                                  key: workspace.key, embedder: workspace.embedder, model: workspace.model, cache: nil,
                                  logger: .init(label: "test"), checkpoint: { stage in stages.lock.withLock { stages.seen.append(stage) } })
        let error = #expect(throws: PublishError.self) { try publisher.publish() }
        #expect(error?.code == .badInput && error?.message.contains("line 31") == true && error?.message.contains(problem) == true,
                "\(String(describing: error))")
        #expect(stages.lock.withLock { stages.seen }.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: workspace.repo + "/blobs"))
    }

    @Test("Given a .jsonl source that is a whole array on one line of more than 64 MiB (a minified export), when read, then it is refused naming line 1 and what a .jsonl file holds, rather than gathered whole in memory")
    func overlongLineRefused() throws {
        let record = #"{"id":"x","title":"t","content":"SECRET-DOCUMENT-TEXT"},"#
        let bytes = Array("[".utf8) + Array(String(repeating: record, count: (65 << 20) / record.utf8.count).utf8) + Array("]".utf8)
        let error = try #require(try Self.refusal("kb.jsonl", bytes))
        #expect(error.code == .badInput && error.message.contains("kb.jsonl: line 1: longer than 64 MiB"), "\(error.message)")
        #expect(!error.message.contains(Self.secret))
    }

    @Test("Given a folder holding, beside a file of prose, an empty Markdown file, one of front matter alone, an empty .jsonl, a .json of [] and one of white space, two links to a folder (one named with a newline, shown as ?) and a FIFO named .md, when read, then the prose's chunks come and one notice each names the eight others")
    func sourceNotices() throws {
        let folder = try TemporaryDirectory.make(), elsewhere = try TemporaryDirectory.make()
        try "Boil water for one minute.".write(toFile: folder + "/good.md", atomically: true, encoding: .utf8)
        for (name, text) in [("empty.md", ""), ("front.md", "---\ntitle: Draft\n---\n  \n"), ("none.jsonl", "\n"), ("none.json", "[]"),
                             ("blank.json", " \n")] {
            try text.write(toFile: folder + "/" + name, atomically: true, encoding: .utf8)
        }
        try "Shared.".write(toFile: elsewhere + "/shared.md", atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: folder + "/shared", withDestinationPath: elsewhere)
        try #require(mkfifo(folder + "/pipe.md", 0o600) == 0)
        try FileManager.default.createSymbolicLink(atPath: folder + "/odd\nlink", withDestinationPath: elsewhere)
        var notices: [String] = [], ids: [String] = []
        try SourceReader.forEachChunk(path: folder, notice: { notices.append($0) }) { _, _, chunk in ids.append(chunk.id) }
        #expect(ids == ["good.md#1"])
        #expect(notices.count == 8, "\(notices)")
        #expect(notices.contains { $0.hasPrefix(folder + "/odd?link links to a folder") }, "\(notices)")
        #expect(notices.contains(folder + "/pipe.md is not a regular file (a FIFO, a socket or a device): not read"), "\(notices)")
        for name in ["empty.md", "front.md"] {
            #expect(notices.contains { $0.hasPrefix(folder + "/\(name) holds no text") }, "\(notices)")
        }
        // An empty .json too (until 2026-12-07 refused as "not valid JSON", where the others say this).
        for name in ["none.jsonl", "none.json", "blank.json"] {
            #expect(notices.contains { $0.hasPrefix(folder + "/\(name) holds no records") }, "\(notices)")
        }
        #expect(notices.contains { $0.hasPrefix(folder + "/shared links to a folder, which is not followed") }, "\(notices)")
    }

    @Test("Given a folder holding a link to one of its own files, a hard link to another, and the repository published to (its JSON manifests), when read, then each file is read once under its own path (a hard link's: its first in order), the repository not at all, and one notice says each")
    func sameFileTwiceAndTheRepository() throws {
        let folder = try TemporaryDirectory.make()
        try FileManager.default.createDirectory(atPath: folder + "/guide", withIntermediateDirectories: true)
        try "Boil water for one minute.".write(toFile: folder + "/guide/intro.md", atomically: true, encoding: .utf8)
        try #"[{"id":"a","title":"A","content":"Sandbags."}]"#.write(toFile: folder + "/v3.json", atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: folder + "/index.md", withDestinationPath: "guide/intro.md")
        try #require(link(folder + "/v3.json", folder + "/latest.json") == 0)
        // As a publish leaves it: a manifest is a JSON object, not an array of records.
        try FileManager.default.createDirectory(atPath: folder + "/repo/channels/stable", withIntermediateDirectories: true)
        try #"{"manifest":{}}"#.write(toFile: folder + "/repo/channels/stable/manifest.json", atomically: true, encoding: .utf8)
        // The file's own path, not a link's, though the link's sorts first.
        try FileManager.default.createSymbolicLink(atPath: folder + "/a-latest.md", withDestinationPath: "guide/intro.md")
        var notices: [String] = [], ids: [String] = []
        try SourceReader.forEachChunk(path: folder, excluding: [folder + "/repo/"], notice: { notices.append($0) }) { _, _, chunk in
            ids.append(chunk.id)
        }
        // Read twice until 2026-12-07: the links' chunks answered again under other ids, and the
        // hard link's refused the publish as repeated ids.
        #expect(ids == ["guide/intro.md#1", "a"], "\(ids)")
        #expect(notices.sorted() == [
            folder + "/a-latest.md is the same file as \(folder)/guide/intro.md (a link): read once, as guide/intro.md",
            folder + "/index.md is the same file as \(folder)/guide/intro.md (a link): read once, as guide/intro.md",
            folder + "/repo is the repository published to: not read as a source",
            folder + "/v3.json is the same file as \(folder)/latest.json (a link): read once, as latest.json",
        ], "\(notices)")
    }

    @Test("Given records whose title and text are written decomposed (NFD Hangul, kana with a combining mark), when read, then each chunk's title and content are in NFC, as devices search")
    func decomposedTextComposed() throws {
        let folder = try TemporaryDirectory.make()
        let title = "한국".decomposedStringWithCanonicalMapping, content = "がっこう 안내".decomposedStringWithCanonicalMapping
        let record = try JSONSerialization.data(withJSONObject: [["id": "k", "title": title, "content": content]])
        try record.write(to: URL(fileURLWithPath: folder + "/kb.json"))
        let chunks = try SourceReader.read(path: folder + "/kb.json")
        #expect(chunks.count == 1)
        #expect(Array(chunks[0].title.unicodeScalars) == Array("한국".precomposedStringWithCanonicalMapping.unicodeScalars))
        #expect(Array(chunks[0].content.unicodeScalars) == Array("がっこう 안내".precomposedStringWithCanonicalMapping.unicodeScalars))
    }

    @Test("Given a FIFO as the source (a pipe, `--source <(…)`), when read, then it is refused at once as not a regular file, without opening it (with no writer, the open would wait for good)",
          .timeLimit(.minutes(1)))
    func pipeSourceRefused() throws {
        let path = try TemporaryDirectory.make() + "/kb.jsonl"
        try #require(mkfifo(path, 0o600) == 0)
        let error = try #require(#expect(throws: PublishError.self) { try SourceReader.read(path: path) })
        #expect(error.code == .badInput && error.message.contains("kb.jsonl: the source is not a regular file or a folder"), "\(error.message)")
    }

    @Test("Given a .txt file of more than 64 MiB (a data dump), when read, then it is refused naming it, before its text is read and chunked")
    func oversizedTextRefused() throws {
        let path = try TemporaryDirectory.make() + "/dump.txt"
        #expect(FileManager.default.createFile(atPath: path, contents: Data("words ".utf8)))
        try #require(truncate(path, 65 << 20) == 0)  // sparse: no disk taken
        let error = try #require(#expect(throws: PublishError.self) { try SourceReader.read(path: path) })
        #expect(error.code == .badInput && error.message.contains("dump.txt: larger than 64 MiB"), "\(error.message)")
    }

    @Test("Given a text file saved as UTF-16 with a byte order mark, one without (a NUL every other byte), and Markdown with a NUL on line 3, when read, then each is refused in one line saying what it is, rather than published as text of NULs")
    func utf16AndNULRefused() throws {
        let utf16 = Array("Boil water.\nKeep it covered.\n".utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
        let marked = try Self.refusal("notes.txt", [0xFF, 0xFE] + utf16)
        #expect(marked?.message.hasSuffix("notes.txt: UTF-16 (it starts with a UTF-16 byte order mark), not UTF-8: save it as UTF-8") == true, "\(String(describing: marked?.message))")
        let unmarked = try Self.refusal("notes.txt", utf16)
        #expect(unmarked?.message.hasSuffix("notes.txt: line 1: a NUL byte: not text, or UTF-16 without a byte order mark (save it as UTF-8)") == true, "\(String(describing: unmarked?.message))")
        let nul = try Self.refusal("notes.md", Array("# Water\n\nBoil\u{0} water.\n".utf8))
        #expect(nul?.code == .badInput && nul?.message.contains("notes.md: line 3: a NUL byte") == true, "\(String(describing: nul?.message))")
        // JSON Lines too: a line at a time, UTF-16 without a mark read as JSON in UTF-16.
        let lines = Array(#"{"id":"a","title":"t","content":"x"}"#.utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
        let unmarkedLines = try Self.refusal("kb.jsonl", lines)
        #expect(unmarkedLines?.message.hasSuffix("kb.jsonl: line 1: a NUL byte: not text, or UTF-16 without a byte order mark (save it as UTF-8)") == true, "\(String(describing: unmarkedLines?.message))")
        let markedLines = try Self.refusal("kb.jsonl", [0xFF, 0xFE] + lines)
        #expect(markedLines?.message.hasSuffix("kb.jsonl: UTF-16 (it starts with a UTF-16 byte order mark), not UTF-8: save it as UTF-8") == true, "\(String(describing: markedLines?.message))")
    }

    @Test("Given a record id holding a newline or a tab, and a Markdown file whose name holds one, when read, then each is refused in one line naming the character; a file of another kind so named is passed over")
    func controlCharactersRefused() throws {
        for (id, shown) in [("a\\nb", "U+000A"), ("a\\tb", "U+0009"), ("a\\u007fb", "U+007F")] {
            let error = try Self.refusal("kb.jsonl", "{\"id\":\"\(id)\",\"title\":\"t\",\"content\":\"x\"}\n")
            #expect(error?.message.hasSuffix("kb.jsonl: line 1: `id` holds the control character \(shown): an id is named in one-line errors and logs; take it out") == true,
                    "\(String(describing: error?.message))")
            #expect(error?.message.contains("\n") == false && error?.message.contains("\t") == false)
        }
        let folder = try TemporaryDirectory.make()
        try "Boil water.".write(toFile: folder + "/water.md", atomically: true, encoding: .utf8)
        try "Slides.".write(toFile: folder + "/talk\nslides.pdf", atomically: true, encoding: .utf8)
        #expect(try SourceReader.read(path: folder).map(\.id) == ["water.md#1"])
        try "Fire.".write(toFile: folder + "/fire\nsafety.md", atomically: true, encoding: .utf8)
        let error = try #require(#expect(throws: PublishError.self) { try SourceReader.read(path: folder) })
        #expect(error.code == .badInput && error.message.contains("holds the control character U+000A (fire?safety.md); rename it"), "\(error.message)")
        #expect(!error.message.contains("\n"))
    }

    @Test("Given a file with invalid UTF-8 on line 3, when read, then the refusal names the file and line 3")
    func invalidUTF8() throws {
        for name in ["kb.jsonl", "notes.md", "kb.json"] {
            var bytes = Array("{\"id\":\"a\",\"title\":\"t\",\"content\":\"x\"}\n\n".utf8)
            bytes += [0x7B, 0x22, 0xC3, 0x28, 0x22, 0x7D]  // C3 28: a lead byte without its continuation
            let error = try #require(try Self.refusal(name, bytes))
            #expect(error.message.hasSuffix("\(name): line 3: invalid UTF-8"), "\(error.message)")
        }
    }

    @Test("Given a published version, when a bad source is published with the CLI, then it exits 65 with one line and the version stays")
    func cliRefusal() throws {
        let workspace = try Workspace()
        let good = try workspace.writeSource(SampleKB.chunks(count: 4))
        #expect(try CLI.run(CLI.publishArguments(workspace, source: good)).status == 0)
        let bad = workspace.folder + "/bad.json"
        try #"[{"id":"x","title":"t"}]"#.write(toFile: bad, atomically: true, encoding: .utf8)
        let result = try CLI.run(CLI.publishArguments(workspace, source: bad))
        #expect(result.status == 65)
        #expect(result.error == "cairn-server: \(bad): index 0 (id \"x\"): missing `content`\n")
        #expect(try workspace.manifest().version == 1)
        #expect(workspace.repository.versionNumbers("stable") == [1])
    }
}
