/// One query. Codable with snake_case keys (the socket API's request body); absent keys take
/// their defaults.
public struct SearchRequest: Sendable, Hashable, Codable {
    public enum Mode: String, Sendable, Hashable, Codable, CaseIterable {
        /// Standardised BM25 and dense scores (z over every row), 0.2 × lexical + 0.8 × dense.
        case hybrid
        /// BM25 over title and content only.
        case lexical
        /// Cosine similarity only.
        case dense
        /// Reciprocal-rank fusion of the lexical and dense lists.
        case rrf
    }

    /// The allowed values of `k`.
    public static let kRange = 1...100

    /// The user's text, used as is: it never reaches SQLite's query syntax (see `LexicalQuery`).
    public var query: String
    /// Results wanted, 1...100. Default 3.
    public var k: Int
    /// Default `.hybrid`.
    public var mode: Mode
    /// Only chunks of this scenario, plus the chunks whose scenario is "general".
    public var scenario: String?
    /// Only chunks that carry every one of these tags (general-scenario chunks included).
    public var tags: [String]?
    /// Dense matches below this cosine are dropped; nil means the configuration's floor (0.2).
    public var minSimilarity: Float?

    public init(query: String, k: Int = 3, mode: Mode = .hybrid, scenario: String? = nil,
                tags: [String]? = nil, minSimilarity: Float? = nil) {
        self.query = query
        self.k = k
        self.mode = mode
        self.scenario = scenario
        self.tags = tags
        self.minSimilarity = minSimilarity
    }

    enum CodingKeys: String, CodingKey {
        case query, k, mode, scenario, tags
        case minSimilarity = "min_similarity"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(query: try container.decode(String.self, forKey: .query),
                  k: try container.decodeIfPresent(Int.self, forKey: .k) ?? 3,
                  mode: try container.decodeIfPresent(Mode.self, forKey: .mode) ?? .hybrid,
                  scenario: try container.decodeIfPresent(String.self, forKey: .scenario),
                  tags: try container.decodeIfPresent([String].self, forKey: .tags),
                  minSimilarity: try container.decodeIfPresent(Float.self, forKey: .minSimilarity))
    }
}
