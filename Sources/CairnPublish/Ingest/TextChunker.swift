public import CairnCore
import Foundation

/// Cuts Markdown and plain text into overlapping chunks of about `targetWords` words.
///
/// Paragraph-aware: a chunk ends at the last paragraph break that lies in the second half of its
/// window, and only when there is none is a paragraph cut mid-way. The next chunk starts
/// `overlapWords` words before the previous one ended. Every chunk of a file has the file's
/// first Markdown heading (else its name without extension) as title, the relative path as
/// source, and the id `<relative path>#<n>`, n counting from 1 — stable while the text is.
public struct TextChunker: Sendable {
    public var options: ChunkingOptions

    public init(options: ChunkingOptions = ChunkingOptions()) {
        self.options = options
    }

    /// One word of the text and whether a paragraph starts with it.
    struct Word {
        var text: Substring
        var startsParagraph: Bool
    }

    public func chunks(of text: String, path: String) -> [Chunk] {
        let isMarkdown = ["md", "markdown"].contains((path as NSString).pathExtension.lowercased())
        var title: String?
        var words: [Word] = []
        var inParagraph = false
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            var line = rawLine[...]
            if isMarkdown, let heading = Self.heading(line) {
                if title == nil { title = String(heading) }
                line = heading
                inParagraph = false  // a heading is a paragraph of its own
            }
            let lineWords = line.split(whereSeparator: \.isWhitespace)
            if lineWords.isEmpty {
                inParagraph = false
                continue
            }
            for (index, word) in lineWords.enumerated() {
                words.append(Word(text: word, startsParagraph: index == 0 && !inParagraph))
            }
            inParagraph = !(isMarkdown && Self.heading(rawLine[...]) != nil)
        }
        let fileTitle = title ?? ((path as NSString).lastPathComponent as NSString).deletingPathExtension
        return windows(count: words.count, isBreak: { words[$0].startsParagraph }).enumerated().map { number, range in
            var content = ""
            for index in range {
                if index != range.lowerBound { content += words[index].startsParagraph ? "\n\n" : " " }
                content += words[index].text
            }
            return Chunk(id: "\(path)#\(number + 1)", title: fileTitle, content: content, source: path)
        }
    }

    /// The word ranges of the chunks: greedy windows of at most `targetWords`, ending at a
    /// paragraph break in the window's second half when there is one, overlapping by
    /// `overlapWords`.
    func windows(count: Int, isBreak: (Int) -> Bool) -> [Range<Int>] {
        let target = options.targetWords, overlap = options.overlapWords
        var ranges: [Range<Int>] = []
        var start = 0
        while start < count {
            var end = min(start + target, count)
            if end < count, let cut = stride(from: end, to: start + max(1, target / 2), by: -1).first(where: isBreak) {
                end = cut
            }
            ranges.append(start..<end)
            if end == count { break }
            start = max(end - overlap, start + 1)
        }
        return ranges
    }

    /// The text of a Markdown ATX heading line (`## Title ##` → `Title`), or nil.
    static func heading(_ line: Substring) -> Substring? {
        let trimmed = line.drop { $0 == " " }
        let hashes = trimmed.prefix { $0 == "#" }
        guard (1...6).contains(hashes.count) else { return nil }
        let rest = trimmed.dropFirst(hashes.count)
        guard let first = rest.first, first == " " || first == "\t" else { return nil }
        var text = rest.trimmingCharacters(in: .whitespaces)[...]
        while text.hasSuffix("#") { text = text.dropLast() }
        let result = text.trimmingCharacters(in: .whitespaces)
        return result.isEmpty ? nil : Substring(result)
    }
}
