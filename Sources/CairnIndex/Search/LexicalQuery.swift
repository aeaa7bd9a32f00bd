import CairnCore

/// Turns arbitrary user text into a safe FTS5 MATCH expression.
///
/// User text is never given to FTS5's query syntax: it is split into word tokens (runs of
/// Unicode letters, marks and digits; everything else separates), lowercased, de-duplicated,
/// stripped of stop words when at least one other token remains, capped in number, and each
/// token is quoted as an FTS5 string (`"token"`, embedded quotes doubled) and joined with OR.
/// `AND`, `NEAR(`, `*`, `^`, `:`, quotes and parentheses thus lose all meaning.
public enum LexicalQuery {
    /// The word tokens of `text`, in order of first appearance, lowercased and unique, in NFC:
    /// FTS5 compares bytes, and a query typed or pasted decomposed ("한" as its jamo, "が" as
    /// "か" and a combining mark, as macOS file names hold them) would miss the precomposed
    /// text that documents hold.
    public static func tokens(_ text: String) -> [String] {
        let text = text.composed
        var tokens: [String] = []
        var seen: Set<String> = []
        var current = String.UnicodeScalarView()
        func flush() {
            guard !current.isEmpty else { return }
            let token = String(current).lowercased()
            current.removeAll()
            if seen.insert(token).inserted { tokens.append(token) }
        }
        for scalar in text.unicodeScalars {
            if isWordScalar(scalar) {
                current.append(scalar)
            } else {
                flush()
            }
        }
        flush()
        return tokens
    }

    /// The MATCH expression for `text`, or nil when it holds no word token.
    public static func matchExpression(for text: String, stopWords: Set<String> = RankingConfiguration.englishStopWords,
                                       maximumTokens: Int = 32) -> String? {
        let tokens = searchTokens(for: text, stopWords: stopWords, maximumTokens: maximumTokens)
        return tokens.isEmpty ? nil : expression(tokens)
    }

    /// The tokens searched for `text`: its word tokens without stop words (unless only stop
    /// words remain), at most `maximumTokens`. Phrase i of the expression is token i.
    public static func searchTokens(for text: String, stopWords: Set<String> = RankingConfiguration.englishStopWords,
                                    maximumTokens: Int = 32) -> [String] {
        var tokens = tokens(text)
        let content = tokens.filter { !stopWords.contains($0) }
        if !content.isEmpty { tokens = content }
        return Array(tokens.prefix(max(1, maximumTokens)))
    }

    /// `tokens`, each quoted, joined with OR.
    static func expression(_ tokens: [String]) -> String {
        tokens.map(quoted).joined(separator: " OR ")
    }

    /// `token` as an FTS5 string literal.
    static func quoted(_ token: String) -> String {
        "\"" + token.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    static func isWordScalar(_ scalar: Unicode.Scalar) -> Bool {
        let properties = scalar.properties
        if properties.isAlphabetic { return true }
        switch properties.generalCategory {
        case .decimalNumber, .letterNumber, .otherNumber, .nonspacingMark, .spacingMark, .enclosingMark:
            return true
        default:
            return false
        }
    }
}

extension String {
    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
