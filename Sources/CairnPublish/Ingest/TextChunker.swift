public import CairnCore
import CairnEmbedding
import Foundation

/// Cuts Markdown and plain text into overlapping chunks of about `targetWords` words.
///
/// Paragraph-aware: a chunk ends at the last paragraph break that lies in the second half of its
/// window, and only when there is none is a paragraph cut mid-way. The next chunk starts
/// `overlapWords` words before the previous one ended. Every chunk of a file has the file's
/// title — a Markdown file's front-matter `title:`, else its first heading, else the file's
/// name without extension — the relative path as source, and the id `<relative path>#<n>`, n
/// counting from 1 — stable while the text is.
///
/// Markdown, as CommonMark reads it: a heading is `#`…`######` after at most three spaces; a
/// line inside a fenced code block (``` or ~~~) is text, never a heading (a shell comment is
/// not a title); YAML front matter (`---` on the first line to the next `---` or `...`) and
/// HTML comments (`<!-- … -->`) are not text.
public struct TextChunker: Sendable {
    public var options: ChunkingOptions

    public init(options: ChunkingOptions = ChunkingOptions()) {
        self.options = options
    }

    /// The longest word kept, in UTF-8 bytes (a long URL fits).
    static let longestWord = 1_000

    /// One word of the text, whether a paragraph starts with it, and whether it is written
    /// against the word before it (a Chinese or Japanese character of a run without spaces).
    struct Word {
        var text: Substring
        var startsParagraph: Bool
        var joinsPrevious = false
        /// A word of a Markdown heading.
        var inHeading = false
    }

    /// Whether `character` is a Han ideograph (the blocks the model's tokenizer makes one token
    /// each), kana, or CJK or full-width punctuation: text written without spaces, which counts
    /// as one word a character.
    static func isWrittenWithoutSpaces(_ character: Character) -> Bool {
        character.unicodeScalars.first.map(isWrittenWithoutSpaces) ?? false
    }

    static func isWrittenWithoutSpaces(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x3000...0x30FF,  // CJK punctuation, hiragana, katakana
             0xFF00...0xFFEF: true  // full-width forms
        default: WordPieceTokenizer.isChinese(scalar)
        }
    }

    /// The words of a run of text between white space: itself, or where it holds Chinese or
    /// Japanese, each such character and each run of other characters between them, as the
    /// embedding model's tokenizer splits them (a paragraph of Chinese has no spaces: as one
    /// word it would be a whole chunk's worth, or past `longestWord` and dropped). A word of
    /// over `longestWord` UTF-8 bytes is left out.
    static func words(of run: Substring, _ body: (Substring, _ joinsPrevious: Bool) -> Void) {
        guard run.unicodeScalars.contains(where: isWrittenWithoutSpaces) else {
            if run.utf8.count <= longestWord { body(run, false) }
            return
        }
        var start = run.startIndex, joins = false
        func emit(_ end: Substring.Index) {
            guard start < end else { return }
            let word = run[start..<end]
            guard word.utf8.count <= longestWord else { return }
            body(word, joins)
            joins = true
        }
        var index = run.startIndex
        while index < run.endIndex {
            let next = run.index(after: index)
            if isWrittenWithoutSpaces(run[index]) {
                emit(index)
                start = index
                emit(next)
                start = next
            }
            index = next
        }
        emit(run.endIndex)
    }

    public func chunks(of text: String, path: String) -> [Chunk] {
        let isMarkdown = ["md", "markdown"].contains((path as NSString).pathExtension.lowercased())
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)[...]
        var title = isMarkdown ? Self.frontMatterTitle(&lines) : nil
        var words: [Word] = []
        var inParagraph = false
        var markdown = MarkdownLines(text: text)
        for (number, rawLine) in zip(lines.indices, lines) {
            var line = rawLine[...]
            var isHeading = false
            if isMarkdown {
                line = markdown.text(of: line, following: lines[lines.index(after: number)...])
                if !markdown.inFence, let heading = Self.heading(line) {
                    if title == nil { title = String(heading) }
                    line = heading
                    isHeading = true
                    inParagraph = false  // a heading is a paragraph of its own
                }
            }
            // A "word" of over `longestWord` bytes is embedded data (a data: URI image, a base64
            // blob, a minified line): no one searches for it, and it would swell the chunk.
            let first = words.count
            for run in line.split(whereSeparator: \.isWhitespace) {
                Self.words(of: run) { word, joins in
                    // A line of Chinese or Japanese wrapped inside a paragraph goes on the next
                    // line without a space.
                    let joinsLine = words.count == first && inParagraph && words.last?.text.last.map(Self.isWrittenWithoutSpaces) == true
                        && word.first.map(Self.isWrittenWithoutSpaces) == true
                    words.append(Word(text: word, startsParagraph: words.count == first && !inParagraph,
                                      joinsPrevious: joins || joinsLine, inHeading: isHeading))
                }
            }
            if words.count == first {
                inParagraph = false
                continue
            }
            inParagraph = !isHeading
        }
        let fileTitle = title ?? ((path as NSString).lastPathComponent as NSString).deletingPathExtension
        // Never right after a heading: cut there, a chunk would end with the heading and the
        // next begin with its text without it (a window searched back from its end meets that
        // break before the heading's own). Of headings in a row (`## Install`, `### Linux`),
        // the cut comes before the first; with no other break in the window's second half (a
        // file of headings alone), between two of them.
        let isBreak = { (index: Int) in
            words[index].startsParagraph && !(index > 0 && words[index - 1].inHeading)
        }
        // The fallback only between two headings: a paragraph's start after a heading would
        // end a chunk with that heading again.
        let betweenHeadings = { (index: Int) in words[index].startsParagraph && words[index].inHeading }
        return windows(count: words.count, isBreak: isBreak, fallback: betweenHeadings).enumerated().map { number, range in
            var content = ""
            for index in range {
                if index != range.lowerBound {
                    content += words[index].startsParagraph ? "\n\n" : words[index].joinsPrevious ? "" : " "
                }
                content += words[index].text
            }
            return Chunk(id: "\(path)#\(number + 1)", title: fileTitle, content: content, source: path)
        }
    }

    /// The word ranges of the chunks: greedy windows of at most `targetWords`, ending at a
    /// break in the window's second half when there is one (`isBreak`, else `fallback`: a
    /// file of headings alone is cut between two of them rather than within one), overlapping
    /// by `overlapWords`.
    func windows(count: Int, isBreak: (Int) -> Bool, fallback: (Int) -> Bool = { _ in false }) -> [Range<Int>] {
        let target = options.targetWords, overlap = options.overlapWords
        var ranges: [Range<Int>] = []
        var start = 0
        while start < count {
            var end = min(start + target, count)
            let candidates = stride(from: end, to: start + max(1, target / 2), by: -1)
            if end < count, let cut = candidates.first(where: isBreak) ?? candidates.first(where: fallback) {
                end = cut
            }
            ranges.append(start..<end)
            if end == count { break }
            // At least a quarter window on, however early a paragraph break cut this one.
            start = max(end - overlap, start + max(1, target / 4))
        }
        return ranges
    }

    /// Whether `line` ends the paragraph before it: blank, a fence's opening, or a heading.
    static func endsParagraph(_ line: Substring) -> Bool {
        let trimmed = line.drop { $0 == " " }
        if trimmed.allSatisfy(\.isWhitespace) { return true }
        if line.count - trimmed.count <= 3, trimmed.hasPrefix("```") || trimmed.hasPrefix("~~~") { return true }
        return heading(line) != nil
    }

    /// The text of a Markdown ATX heading line (`## Title ##` → `Title`), or nil; indented by
    /// four spaces or more, it is code.
    static func heading(_ line: Substring) -> Substring? {
        let trimmed = line.drop { $0 == " " }
        guard line.count - trimmed.count <= 3 else { return nil }
        let hashes = trimmed.prefix { $0 == "#" }
        guard (1...6).contains(hashes.count) else { return nil }
        let rest = trimmed.dropFirst(hashes.count)
        guard let first = rest.first, first == " " || first == "\t" else { return nil }
        var text = rest.trimmingCharacters(in: .whitespaces)[...]
        // A closing run of `#` only after a space or a tab, as CommonMark has it: `# Learn C#`
        // keeps its `#` (until 2026-12-07 it became "Learn C", title of every chunk of the file).
        let closing = text.reversed().prefix { $0 == "#" }.count
        if closing > 0, case let before = text.dropLast(closing), before.isEmpty || before.hasSuffix(" ") || before.hasSuffix("\t") {
            text = before
        }
        let result = text.trimmingCharacters(in: .whitespaces)
        return result.isEmpty ? nil : Substring(result)
    }

    /// Drops YAML front matter from the start of `lines` — `---` on the first line, up to the
    /// next line that is `---` or `...` — and returns its `title:` (unquoted), if any. Without a
    /// closing line, or when its first line is no YAML key (`---` was a thematic break, and the
    /// text to the next one is prose), it is not front matter, and nothing is dropped.
    static func frontMatterTitle(_ lines: inout ArraySlice<Substring>) -> String? {
        guard let first = lines.first, first.trimmingCharacters(in: .whitespaces) == "---",
              let close = lines.dropFirst().firstIndex(where: { ["---", "..."].contains($0.trimmingCharacters(in: .whitespaces)) })
        else { return nil }
        let block = lines[lines.index(after: lines.startIndex)..<close]
        // Its first line that is not blank or a YAML comment is a key: a bare word, or quoted.
        if let key = block.lazy.map({ $0.trimmingCharacters(in: .whitespaces) }).first(where: { !$0.isEmpty && !$0.hasPrefix("#") }) {
            guard let colon = key.firstIndex(of: ":") else { return nil }
            let name = key[..<colon]
            let quoted = name.count >= 2 && (name.first == "\"" || name.first == "'") && name.last == name.first
            let bare = !name.isEmpty && name.allSatisfy { $0.isLetter || $0.isNumber || "_-.$@".contains($0) }
            guard quoted || bare else { return nil }
        }
        lines = lines[lines.index(after: close)...]
        let keys = ["title:", "\"title\":", "'title':"]
        guard let (line, key) = block.lazy.compactMap({ line in keys.first(where: line.hasPrefix).map { (line, $0) } }).first
        else { return nil }
        var value = line.dropFirst(key.count).trimmingCharacters(in: .whitespaces)
        if value.count >= 2, let quote = value.first, quote == "\"" || quote == "'", value.last == quote {
            value = String(value.dropFirst().dropLast())
        }
        return value.isEmpty ? nil : value
    }
}

/// Line-by-line Markdown state: whether a line lies in a fenced code block, and HTML comments
/// (which may span lines) taken out of the text, as CommonMark reads them: a `<!--` that starts
/// a line (after at most three spaces) opens a comment to the next `-->`, fences and blank lines
/// inside included; one inside a paragraph, only when a `-->` follows before the paragraph ends.
/// Otherwise, and in a code span, `<!--` is text (a page about HTML, a stray `<!-- TODO`).
/// Unlike CommonMark, a comment that nothing closes is text too, rather than hiding the rest of
/// the file.
struct MarkdownLines {
    /// The text the lines are cut from (a `-->` is looked for ahead in it).
    private let text: String
    /// The open fence's character and length, while in a fenced code block.
    private var fence: (character: Character, count: Int)?
    private var inComment = false
    /// Whether the last line given was inside a fenced code block (its fences included).
    private(set) var inFence = false
    /// The first `-->` after the last `<!--` searched from (nil: none to the text's end, or no
    /// search yet): a file of `<!--` lines that nothing closes is searched once, not once a line.
    private var nextClose: String.Index?
    private var searched = false

    init(text: String) {
        self.text = text
    }

    /// `line`'s text: itself in a code block, else without its HTML comments; updates the state.
    /// `line` is a slice of the text, and `following` the lines after it (where its paragraph
    /// may go on).
    mutating func text(of line: Substring, following: ArraySlice<Substring>) -> Substring {
        let indent = line.prefix { $0 == " " }.count
        let trimmed = line.dropFirst(indent)
        if !inComment, indent <= 3, let marker = trimmed.first, marker == "`" || marker == "~" {
            let run = trimmed.prefix { $0 == marker }.count
            if let open = fence {
                if marker == open.character, run >= open.count, trimmed.dropFirst(run).allSatisfy(\.isWhitespace) {
                    fence = nil
                    inFence = true  // the closing fence itself
                    return ""
                }
            } else if run >= 3, !(marker == "`" && trimmed.dropFirst(run).contains("`")) {
                fence = (marker, run)
                inFence = true
                return ""
            }
        }
        inFence = fence != nil
        if inFence { return line }
        return withoutComments(line, following: following)
    }

    private mutating func withoutComments(_ line: Substring, following: ArraySlice<Substring>) -> Substring {
        var kept = ""
        var rest = line
        while !rest.isEmpty {
            if inComment {
                guard let end = rest.range(of: "-->") else { return Substring(kept) }
                rest = rest[end.upperBound...]
                inComment = false
            } else if let start = Self.commentStart(in: rest), closes(start, line: line, following: following) {
                kept += rest[..<start.lowerBound] + " "
                rest = rest[start.upperBound...]
                inComment = true
            } else {
                kept += rest
                break
            }
        }
        return Substring(kept)
    }

    /// Whether the `<!--` at `start` of `line` opens a comment: a `-->` follows it, anywhere
    /// when it starts the line, else within its paragraph, which ends at the next blank line,
    /// fence or heading (a heading is a paragraph of its own).
    private mutating func closes(_ start: Range<String.Index>, line: Substring, following: ArraySlice<Substring>) -> Bool {
        let from = start.upperBound
        // `<!--` come in the text's order: a search from an earlier one that found nothing, or
        // found a `-->` at or after this one, answers for this one too.
        if !searched || nextClose.map({ $0 < from }) == true {
            (nextClose, searched) = (text.range(of: "-->", range: from..<text.endIndex)?.lowerBound, true)
        }
        guard let close = nextClose else { return false }
        let before = line[..<start.lowerBound]
        if before.count <= 3 && before.allSatisfy({ $0 == " " }) || close < line.endIndex { return true }
        guard TextChunker.heading(line) == nil else { return false }
        let end = following.first(where: TextChunker.endsParagraph)?.startIndex ?? text.endIndex
        return close < end
    }

    /// The first `<!--` of `line` outside a code span (a run of backticks to the next run of as
    /// many; a run without one is text).
    static func commentStart(in line: Substring) -> Range<Substring.Index>? {
        guard let first = line.range(of: "<!--") else { return nil }
        guard line[..<first.lowerBound].contains("`") else { return first }
        var index = line.startIndex
        while index < line.endIndex {
            if line[index] == "`" {
                let run = line[index...].prefix { $0 == "`" }
                let fence = String(run)
                var search = run.endIndex
                var closed: Substring.Index?
                while let found = line[search...].range(of: fence) {
                    let after = line[found.upperBound...].prefix { $0 == "`" }
                    if after.isEmpty, found.lowerBound == search || line[line.index(before: found.lowerBound)] != "`" {
                        closed = found.upperBound
                        break
                    }
                    search = after.endIndex
                }
                index = closed ?? run.endIndex
                continue
            }
            if line[index...].hasPrefix("<!--") { return index..<line.index(index, offsetBy: 4) }
            index = line.index(after: index)
        }
        return nil
    }
}
