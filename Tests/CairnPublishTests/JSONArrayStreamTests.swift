import CairnCore
@testable import CairnPublish
import CairnTestSupport
import Foundation
import Testing

/// A `.json` source (an array of records) read a record at a time (`RecordParser.forEachArrayRecord`)
/// rather than parsed whole: the same records, and the same refusals.
@Suite("A .json source streamed record by record", .offCooperativePool)
struct JSONArrayStreamTests {
    /// The records `forEachArrayRecord` reads from `bytes` written as a `.json` file, with
    /// their positions, or the refusal.
    static func streamed(_ bytes: [UInt8]) throws -> Result<[(String, Chunk)], PublishError> {
        let path = try TemporaryDirectory.make() + "/kb.json"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        var records: [(String, Chunk)] = []
        do throws(PublishError) {
            try RecordParser.forEachArrayRecord(of: path) { position, chunk in records.append((position, chunk)) }
        } catch {
            return .failure(error)
        }
        return .success(records)
    }

    @Test("Given an array whose records nest arrays and objects, hold strings with brackets, commas, braces, escaped quotes and backslashes, non-ASCII text, and span lines after a byte order mark, when streamed, then each record, its position and its fields are those of the whole file parsed at once")
    func sameRecordsAsTheWholeFile() throws {
        let text = "\u{FEFF} \n[\n  {\"id\": \"a\", \"title\": \"Brackets ] and [ , { }\", \"content\": \"Quote \\\" and backslash \\\\ then \\\"]\\\"\",\n"
            + "   \"tags\": [\"water\", \"safety\"], \"scenario\": \"flood\"},\n"
            + "  {\"id\": \"b\", \"title\": \"Café — 水\", \"content\": \"Line one.\\nLine two, with a tab\\t.\", \"source\": \"p. 12\"}"
            + ",{\"id\":\"c\",\"title\":\"t\",\"content\":\"{\\\"nested\\\": [1, 2]}\",\"tags\":[]}\n]\n\n"
        let bytes = Array(text.utf8)
        let whole = try RecordParser.jsonArray(bytes, file: "kb.json")
        let streamed = try Self.streamed(bytes).get()
        #expect(streamed.map(\.0) == whole.map(\.0) && streamed.count == 3, "\(streamed.map(\.0))")
        #expect(streamed.map(\.1) == whole.map(\.1))
        #expect(streamed.map(\.1.id) == ["a", "b", "c"] && streamed[0].1.content == "Quote \" and backslash \\ then \"]\"")
        #expect(try Self.streamed(Array("[]".utf8)).get().isEmpty)
    }

    @Test("Given an array that is malformed between records, cut short, followed by more text, or holding a record that is not an object, invalid UTF-8 or a repeated key, when streamed, then it is refused in one line naming the file and where, without document text",
          arguments: [
            (#"[{"id":"a","title":"t","content":"SECRET-DOCUMENT-TEXT"},]"#, "not valid JSON: a record is missing before `]`"),
            (#"[{"id":"a","title":"t","content":"x"} {"id":"b","title":"t","content":"SECRET-DOCUMENT-TEXT"}]"#, "not valid JSON: `,` or `]` expected after record 0"),
            (#"[{"id":"a","title":"t","content":"SECRET-DOCUMENT-TEXT"}"#, "not valid JSON: the file ends before the array's closing `]`"),
            (#"[{"id":"a","title":"t","content":"SECRET-DOCUMENT-TEXT"}] trailing"#, "not valid JSON: something follows the array's closing `]`"),
            (#"[{"id":"a","title":"t","content":"x"}, 7]"#, "index 1: a record must be a JSON object"),
            (#"[{"id":"a","title":"t","content":"x","content":"SECRET-DOCUMENT-TEXT"}]"#, "index 0: an object names a key twice"),
            (#"[{"id":"a","title":"t","content":"SECRET-DOCUMENT-TEXT"#, "not valid JSON: the file ends before the array's closing `]`"),
            // A record that does not parse alone is named by its index (a line, when Foundation
            // gives one, is the file's: `parseJSON`'s `firstLine`).
            ("[{\"id\":\"a\",\"title\":\"t\",\"content\":\"x\"},\n\n\n{\"id\": SECRET-DOCUMENT-TEXT}]", "index 1: not valid JSON"),
          ])
    func malformedRefused(text: String, expected: String) throws {
        guard case .failure(let error) = try Self.streamed(Array(text.utf8)) else {
            Issue.record("\(text) was read")
            return
        }
        #expect(error.code == .badInput && error.message.contains("kb.json") && error.message.contains(expected), "\(error.message)")
        #expect(!error.message.contains("SECRET-DOCUMENT-TEXT") && !error.message.contains("\n"))
    }

    @Test("Given an array whose second record holds invalid UTF-8 on the file's line 3, or that starts with two of a byte order mark's three bytes, when streamed, then the refusal names line 3, or line 1")
    func invalidUTF8NamesTheLine() throws {
        let bytes = Array("[{\"id\":\"a\",\"title\":\"t\",\"content\":\"x\"},\n{\"id\":\"b\",\n\"title\":\"".utf8) + [0xC3, 0x28] + Array("\",\"content\":\"y\"}]".utf8)
        guard case .failure(let error) = try Self.streamed(bytes) else {
            Issue.record("read")
            return
        }
        #expect(error.message.hasSuffix("kb.json: line 3: invalid UTF-8"), "\(error.message)")
        // Two bytes of a byte order mark: not a mark, and not UTF-8.
        guard case .failure(let partial) = try Self.streamed([0xEF, 0xBB] + Array(#"[{"id":"a","title":"t","content":"x"}]"#.utf8)) else {
            Issue.record("a partial byte order mark was read")
            return
        }
        #expect(partial.message.hasSuffix("kb.json: line 1: invalid UTF-8"), "\(partial.message)")
    }

    @Test("Given a records file that is missing or is a folder, when read as .json or .jsonl, then the refusal is an I/O error naming the file and the system's reason",
          arguments: ["kb.json", "kb.jsonl"])
    func unreadableFileSaysWhy(name: String) throws {
        let folder = try TemporaryDirectory.make()
        for (path, reason) in [(folder + "/missing-" + name, "No such file or directory"), (folder, "Is a directory")] {
            do throws(PublishError) {
                let read: (String, Chunk) throws(PublishError) -> Void = { _, _ in }
                if name.hasSuffix(".jsonl") { try RecordParser.forEachLine(of: path, read) } else { try RecordParser.forEachArrayRecord(of: path, read) }
                Issue.record("\(path) was read")
            } catch {
                #expect(error.code == .io && error.message == "cannot read \(path): \(reason)", "\(error.message)")
            }
        }
    }
}
