import Foundation

/// The BERT WordPiece tokenizer of all-MiniLM-L6-v2, matching Hugging Face `tokenizers`
/// (BertNormalizer with clean_text, handle_chinese_chars, strip_accents and lowercase;
/// BertPreTokenizer; WordPiece with `##` continuations; `[CLS] … [SEP]`).
public struct WordPieceTokenizer: Sendable {
    public let vocabulary: [String: Int32]
    public let classifyID: Int32
    public let separatorID: Int32
    public let unknownID: Int32
    /// Words longer than this many characters become `[UNK]`, as in the model's tokenizer.
    public let maximumWordCharacters = 100

    /// Reads `vocab.txt`: one token per line, its id is the line number.
    public init(vocabularyPath: String) throws(EmbeddingError) {
        guard let data = FileManager.default.contents(atPath: vocabularyPath) else {
            throw EmbeddingError(.modelNotFound, "cannot read vocabulary \(vocabularyPath)")
        }
        // Split as bytes: splitting the text as Characters took 60 ms of each model load.
        var tokens: [String] = []
        var malformedLine: Int?
        data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            let bytes = raw.bindMemory(to: UInt8.self)
            var start = 0
            while start < bytes.count {
                var end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
                let next = end + 1
                if end > start, bytes[end - 1] == UInt8(ascii: "\r") { end -= 1 }
                guard let token = String(validating: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self) else {
                    malformedLine = tokens.count + 1
                    break
                }
                tokens.append(token)
                start = next
            }
        }
        if let malformedLine {
            throw EmbeddingError(.vocabularyMalformed, "vocabulary \(vocabularyPath) is not UTF-8 (line \(malformedLine))")
        }
        try self.init(tokens: tokens)
    }

    /// A tokenizer over `tokens` (id = position). Must contain [CLS], [SEP] and [UNK].
    public init(tokens: [String]) throws(EmbeddingError) {
        var vocabulary: [String: Int32] = [:]
        vocabulary.reserveCapacity(tokens.count)
        for (index, token) in tokens.enumerated() where vocabulary[token] == nil {
            vocabulary[token] = Int32(index)
        }
        guard let cls = vocabulary["[CLS]"], let sep = vocabulary["[SEP]"], let unk = vocabulary["[UNK]"] else {
            throw EmbeddingError(.vocabularyMalformed, "vocabulary lacks [CLS], [SEP] or [UNK]")
        }
        self.vocabulary = vocabulary
        classifyID = cls
        separatorID = sep
        unknownID = unk
    }

    /// Token ids for `text`: `[CLS]`, at most `maximumLength - 2` word pieces, `[SEP]`.
    public func encode(_ text: String, maximumLength: Int = 256) -> [Int32] {
        let budget = max(0, maximumLength - 2)
        var ids: [Int32] = [classifyID]
        ids.reserveCapacity(min(budget, text.utf8.count / 3 + 8) + 2)
        for word in preTokenize(normalize(text)) {
            if ids.count - 1 >= budget { break }
            appendWordPieces(of: word, to: &ids)
        }
        if ids.count - 1 > budget { ids.removeSubrange((budget + 1)...) }
        ids.append(separatorID)
        return ids
    }

    /// The word-piece strings of `text`, without `[CLS]`/`[SEP]` (for inspection and tests).
    public func tokens(_ text: String) -> [String] {
        let reverse = Dictionary(uniqueKeysWithValues: vocabulary.map { ($0.value, $0.key) })
        return encode(text, maximumLength: Int.max).dropFirst().dropLast().map { reverse[$0] ?? "[UNK]" }
    }

    // MARK: - Normalisation (BertNormalizer)

    func normalize(_ text: String) -> [Unicode.Scalar] {
        // clean_text and handle_chinese_chars
        var cleaned = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if scalar.value == 0 || scalar.value == 0xFFFD || Self.isControl(scalar) { continue }
            if Self.isWhitespace(scalar) {
                cleaned.append(" ")
            } else if Self.isChinese(scalar) {
                cleaned.append(" ")
                cleaned.append(scalar)
                cleaned.append(" ")
            } else {
                cleaned.append(scalar)
            }
        }
        // strip_accents (NFD, drop nonspacing marks), then lowercase, in that order.
        var result: [Unicode.Scalar] = []
        result.reserveCapacity(cleaned.count)
        let isASCII = cleaned.allSatisfy(\.isASCII)
        let decomposed = isASCII ? String(cleaned) : String(cleaned).decomposedStringWithCanonicalMapping
        for scalar in decomposed.unicodeScalars {
            if scalar.isASCII {
                result.append(scalar.value >= 65 && scalar.value <= 90 ? Unicode.Scalar(scalar.value + 32)! : scalar)
                continue
            }
            if scalar.properties.generalCategory == .nonspacingMark { continue }
            if scalar.properties.changesWhenLowercased {
                result.append(contentsOf: scalar.properties.lowercaseMapping.unicodeScalars)
            } else {
                result.append(scalar)
            }
        }
        return result
    }

    static func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "\t" || scalar == "\n" || scalar == "\r" || scalar.properties.isWhitespace
    }

    /// Rust's `is_other`: categories Cc, Cf, Cs, Co and Cn, except tab, newline and return.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        if scalar == "\t" || scalar == "\n" || scalar == "\r" { return false }
        if scalar.isASCII { return scalar.value < 32 || scalar.value == 127 }
        switch scalar.properties.generalCategory {
        case .control, .format, .surrogate, .privateUse, .unassigned: return true
        default: return false
        }
    }

    /// The Han blocks BERT's basic tokenizer makes one token a character.
    public static func isChinese(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x4E00...0x9FFF, 0x3400...0x4DBF, 0x20000...0x2A6DF, 0x2A700...0x2B73F,
             0x2B740...0x2B81F, 0x2B920...0x2CEAF, 0xF900...0xFAFF, 0x2F800...0x2FA1F: true
        default: false
        }
    }

    /// ASCII punctuation (which includes symbols such as `$`, `+`, `^`) or Unicode category P*.
    static func isPunctuation(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.isASCII {
            let v = scalar.value
            return (33...47).contains(v) || (58...64).contains(v) || (91...96).contains(v) || (123...126).contains(v)
        }
        switch scalar.properties.generalCategory {
        case .connectorPunctuation, .dashPunctuation, .openPunctuation, .closePunctuation,
             .initialPunctuation, .finalPunctuation, .otherPunctuation: return true
        default: return false
        }
    }

    // MARK: - Pre-tokenisation (BertPreTokenizer) and WordPiece

    /// Splits on whitespace (dropped) and punctuation (kept, one character per word).
    func preTokenize(_ scalars: [Unicode.Scalar]) -> [ArraySlice<Unicode.Scalar>] {
        var words: [ArraySlice<Unicode.Scalar>] = []
        var start = 0
        for (index, scalar) in scalars.enumerated() {
            if Self.isWhitespace(scalar) {
                if start < index { words.append(scalars[start..<index]) }
                start = index + 1
            } else if Self.isPunctuation(scalar) {
                if start < index { words.append(scalars[start..<index]) }
                words.append(scalars[index...index])
                start = index + 1
            }
        }
        if start < scalars.count { words.append(scalars[start...]) }
        return words
    }

    /// Greedy longest-match-first; a word with any unmatched remainder is a single `[UNK]`.
    func appendWordPieces(of word: ArraySlice<Unicode.Scalar>, to ids: inout [Int32]) {
        if word.count > maximumWordCharacters {
            ids.append(unknownID)
            return
        }
        let mark = ids.count
        var start = word.startIndex
        while start < word.endIndex {
            var end = word.endIndex
            var match: Int32?
            while start < end {
                var piece = start == word.startIndex ? "" : "##"
                piece.unicodeScalars.append(contentsOf: word[start..<end])
                if let id = vocabulary[piece] {
                    match = id
                    break
                }
                end -= 1
            }
            guard let id = match else {
                ids.removeSubrange(mark...)
                ids.append(unknownID)
                return
            }
            ids.append(id)
            start = end
        }
    }
}
