/// How `SearchIndex` ranks. Every field has a documented default that follows DESIGN.md's
/// "Retrieval" section; the evaluation decides whether they change.
public struct RankingConfiguration: Sendable, Hashable {
    /// BM25 weight of the title column. Default 3.0 (2.0 until BM25's b went to 0.4: with it,
    /// lexical nDCG@10 rose on every collection with titles at 2.5–4, docs/quality.md).
    public var titleWeight: Double
    /// BM25 weight of the content column. Default 1.0.
    public var contentWeight: Double
    /// BM25's term-frequency saturation k1 and length normalisation b. Defaults 1.5 and 0.4
    /// (FTS5's fixed 1.2 and 0.75 until docs/quality.md measured lexical nDCG@10 +0.55 points,
    /// SE 0.25, on the mean over six collections, none lower beyond its noise).
    public var bm25K1: Double
    public var bm25B: Double
    /// Dense matches below this cosine are dropped when a request sets no `minSimilarity`.
    /// Default 0.2 (0.25 until docs/quality.md measured that it cost dense search 0.9–1.4 nDCG@10
    /// points against exact search on nfcorpus and NuraSafe; unrelated MiniLM pairs stay below it).
    public var similarityFloor: Float
    /// Weight of the standardised dense score (z over every row) in hybrid fusion. Default 0.8,
    /// the best mean nDCG@10 over six collections (docs/quality.md: 0.75–0.85 within 0.2 points;
    /// 0.7 −0.24, 0.9 −0.78).
    public var denseWeight: Double
    /// Weight of the standardised lexical score in hybrid fusion. Default 0.2.
    public var lexicalWeight: Double
    /// In hybrid and rrf, each list (lexical, dense) offers its best `candidateDepth`
    /// candidates to the fusion, whatever k is, so that the first answers do not depend on how
    /// many a request asks for. Default 100 (the largest k).
    public var candidateDepth: Int
    /// Dense scores are degenerate (hybrid and rrf then use lexical alone) when the best
    /// `degenerateWindow` candidate scores, taken before the similarity floor, are all above
    /// `degenerateMinimumScore` and lie within `degenerateMaximumSpread` of each other. At least
    /// two candidates are needed to judge. Defaults 20, 0.88, 0.06.
    public var degenerateWindow: Int
    public var degenerateMinimumScore: Float
    public var degenerateMaximumSpread: Float
    /// The constant of reciprocal-rank fusion, Σ 1 / (constant + rank). Default 60.
    public var rrfConstant: Double
    /// Word tokens of a query beyond this many are ignored. Default 32.
    public var maximumQueryTokens: Int
    /// Dropped from the lexical query unless nothing else remains. Default `englishStopWords`.
    public var stopWords: Set<String>
    /// Read-only connections kept open for concurrent queries (more are opened, briefly, when
    /// all are busy). Default 4.
    public var connectionPoolSize: Int
    /// Above this many rows (and for a query without filters) dense search first narrows the
    /// index by the signs of its vectors (a Hamming distance over 48 bytes a row for 384
    /// dimensions) to `shortlistFraction` of the rows, scores those from the int8 codes and
    /// rescores the best exactly; a hybrid query's dense moments then come from a fixed sample of
    /// `SearchIndex.momentSample` rows. 0 narrows every index; `Int.max` never. Default 50,000
    /// (a flat scan of fewer rows takes a few milliseconds; docs/scale.md and Benchmarks/README.md
    /// have the measurements).
    public var approximateDenseAbove: Int
    /// The share of the rows the sign bits keep for scoring from the codes (at least
    /// `SearchIndex.minimumShortlist`). Default 0.03: dense recall@10 against exact search 0.98
    /// on NFCorpus replicated to 100,000 chunks by `Benchmarks/bench-query` (docs/scale.md).
    public var shortlistFraction: Double
    /// Above this many rows an unfiltered lexical query of several tokens scores only the rows
    /// holding its rarest tokens (MaxScore: the list is exactly the full search's, the moments of
    /// the rows not scored estimated; docs/scale.md). 0 prunes every index; `Int.max` never.
    /// Default 50,000, as `approximateDenseAbove`.
    public var approximateLexicalAbove: Int
    /// A lexical query scores at most this many of its words, the rarest (a long query's common
    /// words add little to BM25 but make it walk most of the index). Default 32, as many as
    /// `maximumQueryTokens`.
    public var lexicalWords: Int
    /// An unfiltered query over more than `approximateLexicalAbove` rows whose words' rows add up
    /// to more than this is scored whole, from FTS5's postings read word by word
    /// (`FullTextPostings`), instead of pruned: the list and the moments exact. 0 for every such
    /// query, `Int.max` never. Default nil: a fifth of the index's rows, since the postings'
    /// score array, one double per row, is the path's fixed cost. At a million rows (200,000) the
    /// worst 1% of queries went from 302 / 447 ms to 39 / 53, and NFCorpus's queries took as long
    /// either way; a fixed 200,000 left them pruned at 100,000 rows, 44 / 60 ms against 7 / 12
    /// from the postings (docs/scale.md).
    public var lexicalPostingsAbove: Int?

    public init(titleWeight: Double = 3.0, contentWeight: Double = 1.0, bm25K1: Double = 1.5, bm25B: Double = 0.4,
                similarityFloor: Float = 0.2,
                denseWeight: Double = 0.8, lexicalWeight: Double = 0.2,
                candidateDepth: Int = 100,
                degenerateWindow: Int = 20, degenerateMinimumScore: Float = 0.88, degenerateMaximumSpread: Float = 0.06,
                rrfConstant: Double = 60, maximumQueryTokens: Int = 32,
                stopWords: Set<String> = RankingConfiguration.englishStopWords, connectionPoolSize: Int = 4,
                approximateDenseAbove: Int = 50_000, shortlistFraction: Double = 0.03,
                approximateLexicalAbove: Int = 50_000, lexicalWords: Int = 32, lexicalPostingsAbove: Int? = nil) {
        self.titleWeight = titleWeight
        self.contentWeight = contentWeight
        self.bm25K1 = bm25K1
        self.bm25B = bm25B
        self.similarityFloor = similarityFloor
        self.denseWeight = denseWeight
        self.lexicalWeight = lexicalWeight
        self.candidateDepth = candidateDepth
        self.degenerateWindow = degenerateWindow
        self.degenerateMinimumScore = degenerateMinimumScore
        self.degenerateMaximumSpread = degenerateMaximumSpread
        self.rrfConstant = rrfConstant
        self.maximumQueryTokens = maximumQueryTokens
        self.stopWords = stopWords
        self.connectionPoolSize = connectionPoolSize
        self.approximateDenseAbove = approximateDenseAbove
        self.shortlistFraction = shortlistFraction
        self.approximateLexicalAbove = approximateLexicalAbove
        self.lexicalWords = lexicalWords
        self.lexicalPostingsAbove = lexicalPostingsAbove
    }

    /// A small list of English function words (lowercase).
    public static let englishStopWords: Set<String> = [
        "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how",
        "i", "if", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "should", "so",
        "that", "the", "their", "there", "this", "to", "was", "we", "what", "when", "where",
        "which", "who", "why", "will", "with", "you", "your",
    ]
}
