import CairnTestSupport
import Foundation
import Testing
@testable import CairnEmbedding

@Suite("WordPiece tokenizer rules")
struct TokenizerTests {
    let tokenizer = try! WordPieceTokenizer(tokens: [
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "cafe", "water", "boil", "##ing", "##s", "un", "##safe", "safe",
        ",", ".", "!", "'", "$", "水", "火", "it", "s", "-", "co", "##op", "naive",
    ])

    @Test("Given mixed case, accents and punctuation, when tokenizing, then they are lowered, stripped and split")
    func normalisesAndSplits() {
        #expect(tokenizer.tokens("Café, BOILING water!") == ["cafe", ",", "boil", "##ing", "water", "!"])
        #expect(tokenizer.tokens("naïve it's $") == ["naive", "it", "'", "s", "$"])
        #expect(tokenizer.tokens("co-op") == ["co", "-", "[UNK]"])
    }

    @Test("Given CJK characters, when tokenizing, then each is its own word")
    func splitsCJK() {
        #expect(tokenizer.tokens("水火") == ["水", "火"])
    }

    @Test("Given a word with no full decomposition, when tokenizing, then the whole word is [UNK]")
    func unknownWords() {
        #expect(tokenizer.tokens("unsafe boils xyz") == ["un", "##safe", "boil", "##s", "[UNK]"])
        #expect(tokenizer.tokens(String(repeating: "a", count: 101)) == ["[UNK]"])
    }

    @Test("Given control characters and odd white space, when tokenizing, then they are dropped or split on")
    func cleansText() {
        // U+200B is a format character (Cf): removed, so it joins; U+00A0 and tab are white space.
        #expect(tokenizer.tokens("wa\u{200B}ter\u{0}\u{00A0}boil\tsafe\u{FFFD} cafe\u{7}") == ["water", "boil", "safe", "cafe"])
    }

    @Test("Given a long text, when encoding, then it is [CLS] + at most max-2 pieces + [SEP]")
    func truncates() {
        let ids = tokenizer.encode(Array(repeating: "water", count: 300).joined(separator: " "), maximumLength: 256)
        #expect(ids.count == 256)
        #expect(ids.first == tokenizer.classifyID && ids.last == tokenizer.separatorID)
        #expect(tokenizer.encode("", maximumLength: 256) == [tokenizer.classifyID, tokenizer.separatorID])
    }

    @Test("Given a vocab.txt with CRLF line ends, an empty line and non-ASCII tokens, when read, then each line's token has its line's id")
    func vocabularyFileLines() throws {
        let path = try TemporaryDirectory.make() + "/vocab.txt"
        try Data("[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n\r\ncafé\r\n##é\r\n水".utf8).write(to: URL(fileURLWithPath: path))
        let read = try WordPieceTokenizer(vocabularyPath: path)
        #expect(read.vocabulary == ["[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "": 4, "café": 5, "##é": 6, "水": 7])
        #expect(read.classifyID == 2 && read.separatorID == 3 && read.unknownID == 1)
    }

    @Test("Given a vocab.txt with a line that is not UTF-8, when read, then it is refused as malformed, naming the line")
    func vocabularyFileNotUTF8() throws {
        let path = try TemporaryDirectory.make() + "/vocab.txt"
        try (Data("[UNK]\n[CLS]\n[SEP]\n".utf8) + Data([0x61, 0xFF, 0xFE, 0x0A])).write(to: URL(fileURLWithPath: path))
        #expect {
            _ = try WordPieceTokenizer(vocabularyPath: path)
        } throws: { error in
            (error as? EmbeddingError)?.code == .vocabularyMalformed && (error as? EmbeddingError)?.message.contains("line 4") == true
        }
    }
}
