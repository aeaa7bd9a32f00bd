public import CairnCore

/// One ranked chunk.
public struct SearchResult: Sendable, Hashable, Codable {
    /// 1-based position.
    public var rank: Int
    public var chunk: Chunk
    /// −BM25 (higher is better), when the chunk was in the lexical list.
    public var lexicalScore: Double?
    /// Cosine similarity, when the chunk was in the dense list.
    public var denseScore: Double?
    /// The score the ranking used: the fused score for hybrid and rrf, else the one list's score.
    public var fusedScore: Double
    /// The channel and version the chunk came from, set by a daemon that names them (absent from
    /// the JSON when nil).
    public var channel: String?
    public var version: Int?

    public init(rank: Int, chunk: Chunk, lexicalScore: Double?, denseScore: Double?, fusedScore: Double) {
        self.rank = rank
        self.chunk = chunk
        self.lexicalScore = lexicalScore
        self.denseScore = denseScore
        self.fusedScore = fusedScore
    }

    enum CodingKeys: String, CodingKey {
        case rank, chunk
        case lexicalScore = "lexical_score"
        case denseScore = "dense_score"
        case fusedScore = "fused_score"
        case channel, version
    }
}

/// The answer to one `SearchRequest`. Codable with snake_case keys (the socket API's body).
public struct SearchResponse: Sendable, Hashable, Codable {
    /// How the lists were combined.
    public enum Fusion: String, Sendable, Hashable, Codable {
        /// One list only (lexical, dense, or no query vector).
        case none
        /// 0.8 × z-scored cosine + 0.2 × z-scored BM25, each z over every row the filter lets through.
        case weighted
        /// Reciprocal-rank fusion.
        case rrf
        /// Dense scores were degenerate, so lexical alone ranked.
        case lexicalFallback = "lexical-fallback"
    }

    public struct Timings: Sendable, Hashable, Codable {
        public var lexicalMilliseconds: Double
        public var denseMilliseconds: Double
        public var totalMilliseconds: Double

        public init(lexicalMilliseconds: Double, denseMilliseconds: Double, totalMilliseconds: Double) {
            self.lexicalMilliseconds = lexicalMilliseconds
            self.denseMilliseconds = denseMilliseconds
            self.totalMilliseconds = totalMilliseconds
        }

        enum CodingKeys: String, CodingKey {
            case lexicalMilliseconds = "lexical_ms"
            case denseMilliseconds = "dense_ms"
            case totalMilliseconds = "total_ms"
        }
    }

    public var results: [SearchResult]
    /// The snapshot version every result came from.
    public var version: Int
    /// The state root of that version, hex.
    public var stateRoot: String
    /// The mode that actually ranked (lexical when no query vector was given or dense was degenerate).
    public var mode: SearchRequest.Mode
    public var fusion: Fusion
    /// False when no query vector was given: the answer is lexical only.
    public var denseAvailable: Bool
    public var timings: Timings
    /// In a weighted hybrid answer, the moments its z-scores were taken over (not on the wire):
    /// what several channels pool to standardise over their union.
    public var hybridMoments: HybridMoments?
    /// The filter values no chunk of this version carries (nil when each names some chunk).
    public var unmatchedFilter: UnmatchedFilter?

    /// A `filter.scenario` or `filter.tags` value that no chunk carries, which then silently
    /// lets only `general` chunks (a scenario) or nothing (a tag) through: said in the answer, with
    /// the values the version has, so that a caller (an agent guessing "Flood" for "flood") can
    /// correct itself instead of concluding the knowledge base holds nothing.
    public struct UnmatchedFilter: Sendable, Hashable, Codable {
        /// The scenario asked for, when no chunk has it.
        public var scenario: String?
        /// With `scenario`: every scenario the version's chunks have, sorted.
        public var scenarios: [String]?
        /// The tags asked for that no chunk carries, in the request's order.
        public var tags: [String]
        /// With `tags`: tags the version has that equal one of them but for case, sorted.
        public var similarTags: [String]

        public init(scenario: String? = nil, scenarios: [String]? = nil, tags: [String] = [], similarTags: [String] = []) {
            self.scenario = scenario
            self.scenarios = scenarios
            self.tags = tags
            self.similarTags = similarTags
        }

        /// One line for people and models: what matched nothing, what that did to the search,
        /// and what the version has instead.
        public var sentence: String {
            var parts: [String] = []
            if let scenario {
                parts.append("no passage has scenario \"\(scenario)\", so only general passages were searched"
                             + ((scenarios ?? []).isEmpty ? "" : " (scenarios here: \((scenarios ?? []).joined(separator: ", ")))"))
            }
            if !tags.isEmpty {
                let named = tags.map { "\"\($0)\"" }.joined(separator: ", ")
                parts.append("no passage has tag\(tags.count > 1 ? "s" : "") \(named), so nothing passed the filter"
                             + (similarTags.isEmpty ? "" : " (tags differing only in case: \(similarTags.joined(separator: ", ")))"))
            }
            return parts.joined(separator: "; ")
        }

        /// What stays unmatched in every one of several answers (a value one channel has is not
        /// unmatched); nil when nothing does.
        public static func common(_ all: [UnmatchedFilter?]) -> UnmatchedFilter? {
            guard let first = all.first, var common = first else { return nil }
            for other in all.dropFirst() {
                guard let other else { return nil }
                if common.scenario != other.scenario { common.scenario = nil }
                common.scenarios = common.scenario == nil ? nil : Array(Set((common.scenarios ?? []) + (other.scenarios ?? []))).sorted()
                common.tags = common.tags.filter(other.tags.contains)
                common.similarTags = Array(Set(common.similarTags + other.similarTags)).sorted()
            }
            if common.tags.isEmpty { common.similarTags = [] }
            return common.scenario == nil && common.tags.isEmpty ? nil : common
        }

        enum CodingKeys: String, CodingKey {
            case scenario, scenarios, tags
            case similarTags = "similar_tags"
        }

        /// Each part only when it applies (protocol/socket-api.md): no empty lists.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encodeIfPresent(scenario, forKey: .scenario)
            try c.encodeIfPresent(scenarios, forKey: .scenarios)
            if !tags.isEmpty { try c.encode(tags, forKey: .tags) }
            if !similarTags.isEmpty { try c.encode(similarTags, forKey: .similarTags) }
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            scenario = try c.decodeIfPresent(String.self, forKey: .scenario)
            scenarios = try c.decodeIfPresent([String].self, forKey: .scenarios)
            tags = try c.decodeIfPresent([String].self, forKey: .tags) ?? []
            similarTags = try c.decodeIfPresent([String].self, forKey: .similarTags) ?? []
        }
    }

    public init(results: [SearchResult], version: Int, stateRoot: String, mode: SearchRequest.Mode,
                fusion: Fusion, denseAvailable: Bool, timings: Timings) {
        self.results = results
        self.version = version
        self.stateRoot = stateRoot
        self.mode = mode
        self.fusion = fusion
        self.denseAvailable = denseAvailable
        self.timings = timings
    }

    enum CodingKeys: String, CodingKey {
        case results, version
        case stateRoot = "state_root"
        case mode, fusion
        case denseAvailable = "dense_available"
        case timings
    }
}

/// The running sums behind one hybrid answer's z-scores: lexical (−BM25, 0 for rows that do not
/// match) and dense (cosine) over every row the filter let through, and the weights that mixed them.
/// Sums of several answers are the sums over the union of their rows.
public struct HybridMoments: Sendable, Hashable, Codable {
    public var lexicalCount = 0, lexicalSum = 0.0, lexicalSquares = 0.0
    public var denseCount = 0, denseSum = 0.0, denseSquares = 0.0
    public var lexicalWeight: Double
    public var denseWeight: Double

    public init(lexicalWeight: Double, denseWeight: Double) {
        self.lexicalWeight = lexicalWeight
        self.denseWeight = denseWeight
    }

    /// These sums plus `other`'s (the weights are this answer's).
    public func pooled(with other: HybridMoments) -> HybridMoments {
        var sum = self
        sum.lexicalCount += other.lexicalCount
        sum.lexicalSum += other.lexicalSum
        sum.lexicalSquares += other.lexicalSquares
        sum.denseCount += other.denseCount
        sum.denseSum += other.denseSum
        sum.denseSquares += other.denseSquares
        return sum
    }

    /// The weighted sum of z-scores of a row with `lexical` (nil: no match, 0) and `dense` scores.
    public func fused(lexical: Double?, dense: Double) -> Double {
        func z(_ value: Double, _ count: Int, _ sum: Double, _ squares: Double) -> Double {
            guard count > 1 else { return 0 }
            let mean = sum / Double(count)
            let deviation = max(0, squares / Double(count) - mean * mean).squareRoot()
            return deviation > 0 ? (value - mean) / deviation : 0
        }
        return lexicalWeight * z(lexical ?? 0, lexicalCount, lexicalSum, lexicalSquares)
            + denseWeight * z(dense, denseCount, denseSum, denseSquares)
    }
}
