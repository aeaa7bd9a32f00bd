public import CairnCore
import CairnThreads
import CEncoderKernels
import CSQLite
import Dispatch
import Synchronization

/// Hybrid retrieval over one installed snapshot (read-only, safe to query from many tasks).
///
/// The rows files beside the snapshot (`IndexContents`: every vector as int8 codes with a scale
/// per row, its sign bits, ids, rowids, scenarios, tags and BM25 lengths) are memory-mapped at
/// open, so a dense query is one pass over a quarter of the float32 vectors' bytes through the
/// page cache, and opening reads no row; the best rows of that pass (and a hybrid query's
/// lexical candidates) are then rescored exactly from the float32 vectors in the file. Above
/// `RankingConfiguration.approximateDenseAbove` rows the pass is narrowed first: an unfiltered
/// dense query scores from the codes only the rows whose signs (48 bytes a row for 384
/// dimensions) differ least from its own, and a hybrid query's dense moments come from a fixed
/// sample of rows. Lexical queries, rescoring and chunk fetches go to SQLite through a small
/// pool of read-only connections. The file must not change while it is open: a device installs
/// a new version beside the old one and swaps by rename, then opens a new `SearchIndex`.
///
/// The caller verifies a snapshot before serving it (a device in the pass that also writes the
/// rows files, `Snapshot.scan`, whose result it hands to `init(path:configuration:contents:)`);
/// opening only checks the meta and that the rows files describe it (else one pass writes them).
public final class SearchIndex: Sendable {
    public let meta: SnapshotMeta
    public let configuration: RankingConfiguration
    /// Chunks in the index.
    public var count: Int { contents.count }
    /// Whether dense search narrows the rows by their signs before scoring them
    /// (`RankingConfiguration.approximateDenseAbove`), for queries without filters.
    public let narrowsDense: Bool
    /// How the rows were found at open: in their rows files, or by a pass over the file's rows
    /// that wrote them (no rows files beside it, or files of another version).
    public let rowsSource: RowsSource

    public enum RowsSource: String, Sendable {
        /// Handed over by the pass that verified the file, or opened from the rows files.
        case rowsFiles = "rows_files"
        /// Read from the snapshot's rows (and written to rows files) when it opened.
        case scanned
    }

    let pool: ConnectionPool
    let documentCounts = DocumentCounts()
    /// The rows files the index reads (a delta to this version is checked against them).
    public let contents: IndexContents
    /// When narrowing: the rows a hybrid query's dense moments are estimated from, their codes
    /// and scales copied into blocks (6 MiB at 384 dimensions) so that a query reads them as a
    /// stream, not row by row across the whole matrix.
    private let sample: MomentSample

    public static let generalScenario = "general"

    /// Opens the snapshot at `path`.
    /// - Parameter contents: the rows files as the pass that verified this same file wrote them
    ///   (`Snapshot.scan`, or a delta's `CheckedDelta.contents`); nil opens those beside `path`,
    ///   or, when there are none for this version, writes them in one pass over its rows (beside
    ///   it, else in a temporary file when its folder cannot be written). Contents of another
    ///   version are refused with `.snapshotMalformed`.
    public init(path: String, configuration: RankingConfiguration = RankingConfiguration(),
                contents: IndexContents? = nil) throws(IndexError) {
        let (file, db) = try ConnectionPool.open(path)
        let meta = try Snapshot.meta(in: db)
        let loaded: IndexContents
        if let contents {
            guard contents.meta == meta else {
                throw IndexError(.snapshotMalformed, "the preloaded rows belong to another file than the one opened")
            }
            (loaded, rowsSource) = (contents, .rowsFiles)
        } else if let found = try IndexContents.open(beside: path, meta: meta) {
            (loaded, rowsSource) = (found, .rowsFiles)
        } else {
            // By the path: the file opened must still be there (a rename over it would give
            // another version's rows beside this file's connections).
            let scanned = try Snapshot.scanWritingRows(at: path)
            guard scanned.meta == meta else { throw PinnedFile.replaced(path) }
            (loaded, rowsSource) = (scanned, .scanned)
        }
        self.meta = meta
        self.configuration = configuration
        self.contents = loaded
        narrowsDense = loaded.count > configuration.approximateDenseAbove
        sample = narrowsDense ? MomentSample(loaded) : MomentSample()
        let lengths = DocumentLengths(contents: loaded)
        try BM25Function.register(on: db, lengths: lengths)
        self.pool = ConnectionPool(file: file, first: db, capacity: configuration.connectionPoolSize) {
            (connection) throws(IndexError) in try BM25Function.register(on: connection, lengths: lengths)
        }
    }

    // MARK: Search

    public func search(_ request: SearchRequest, queryVector: [Float]?) throws(IndexError) -> SearchResponse {
        try search(request, overlapping: false) { queryVector }
    }

    /// The same search, with the query embedded by `embed` (nil: no model) while the lexical
    /// part runs on another thread, so a hybrid query costs max(embedding + dense, lexical)
    /// instead of their sum. `embed` is not called in lexical mode.
    public func search(_ request: SearchRequest, embed: () -> [Float]?) throws(IndexError) -> SearchResponse {
        try search(request, overlapping: request.mode != .lexical && request.mode != .dense, embed: embed)
    }

    private func search(_ request: SearchRequest, overlapping: Bool, embed: () -> [Float]?) throws(IndexError) -> SearchResponse {
        let clock = ContinuousClock()
        let start = clock.now
        guard SearchRequest.kRange.contains(request.k) else {
            throw IndexError(.invalidRequest, "k must be between \(SearchRequest.kRange.lowerBound) and \(SearchRequest.kRange.upperBound)")
        }
        let floor = request.minSimilarity ?? configuration.similarityFloor
        guard floor.isFinite else { throw IndexError(.invalidRequest, "min_similarity must be a finite number") }

        let mask = candidateMask(scenario: request.scenario, tags: request.tags)
        // A fused ranking takes its candidates from lists of a fixed depth, so that the first
        // answers of a request do not depend on how many it asks for; a single list's order
        // does not depend on its length.
        let fuses = request.mode == .hybrid || request.mode == .rrf
        let limit = fuses ? max(configuration.candidateDepth, request.k) : request.k
        let background = overlapping ? LexicalTask(index: self, query: request.query, limit: limit, mask: mask) : nil

        let queryVector = request.mode == .lexical ? nil : embed()
        if let queryVector, queryVector.count != meta.dimension {
            background?.wait()
            throw IndexError(.invalidRequest, "the query vector has \(queryVector.count) values; the index's dimension is \(meta.dimension)")
        }
        var dense = DenseCandidates()
        var denseTime = Duration.zero
        if let queryVector {
            let denseStart = clock.now
            do {
                dense = try self.dense(queryVector, floor: floor, limit: limit, mask: mask, moments: request.mode == .hybrid)
            } catch {
                background?.wait()
                throw error
            }
            denseTime = clock.now - denseStart
        }

        var lexical = LexicalCandidates()
        var lexicalTime = Duration.zero
        if let background {
            (lexical, lexicalTime) = try background.result()
        } else if request.mode != .dense || queryVector == nil {
            let lexicalStart = clock.now
            lexical = try self.lexical(request.query, limit: limit, mask: mask)
            lexicalTime = clock.now - lexicalStart
        }

        let ranked: [FusedRow]
        var hybridMoments: HybridMoments?
        let modeUsed: SearchRequest.Mode
        let fusion: SearchResponse.Fusion
        switch (request.mode, queryVector != nil) {
        case (.lexical, _), (_, false):
            (ranked, modeUsed, fusion) = (RankFusion.single(lexical.list, isDense: false), .lexical, .none)
        case (.dense, true):
            (ranked, modeUsed, fusion) = (RankFusion.single(dense.list, isDense: true), .dense, .none)
        // Degenerate cosines (a broken model, or a filter leaving a few close paraphrases): the
        // lexical list alone ranks, unless it is empty, when the dense one still answers.
        case (.hybrid, true) where dense.isDegenerate && !lexical.list.isEmpty,
             (.rrf, true) where dense.isDegenerate && !lexical.list.isEmpty:
            (ranked, modeUsed, fusion) = (RankFusion.single(lexical.list, isDense: false), .lexical, .lexicalFallback)
        case (.hybrid, true):
            // The lexical candidates' cosines are exact too, not the codes' estimates.
            try rescore(lexical.list.map(\.row).filter { !dense.exact.contains($0) }, query: queryVector!, into: &dense.scores)
            let cosines = dense.scores
            let denseMoments = dense.moments ?? ScoreMoments(scores: cosines.all, mask: liveMask(mask))
            var moments = HybridMoments(lexicalWeight: configuration.lexicalWeight, denseWeight: configuration.denseWeight)
            (moments.lexicalCount, moments.lexicalSum, moments.lexicalSquares) = lexical.moments.sums
            (moments.denseCount, moments.denseSum, moments.denseSquares) = denseMoments.sums
            hybridMoments = moments
            ranked = RankFusion.standardized(lexical: lexical.list, lexicalMoments: lexical.moments,
                                             dense: dense.list, denseMoments: denseMoments,
                                             denseScore: { Double(cosines[$0]) },
                                             lexicalWeight: configuration.lexicalWeight, denseWeight: configuration.denseWeight)
            (modeUsed, fusion) = (.hybrid, .weighted)
        case (.rrf, true):
            ranked = RankFusion.reciprocalRank(lexical: lexical.list, dense: dense.list, constant: configuration.rrfConstant)
            (modeUsed, fusion) = (.rrf, .rrf)
        }

        let top = Array(ranked.prefix(request.k))
        let chunks = try pool.withConnection { (db) throws(IndexError) in try fetchChunks(rows: top.map(\.row), db: db) }
        let results = zip(top, chunks).enumerated().map { index, pair in
            SearchResult(rank: index + 1, chunk: pair.1, lexicalScore: pair.0.lexical, denseScore: pair.0.dense,
                         fusedScore: pair.0.fused)
        }
        var response = SearchResponse(
            results: results, version: meta.version, stateRoot: meta.stateRoot.hex, mode: modeUsed, fusion: fusion,
            denseAvailable: queryVector != nil,
            timings: .init(lexicalMilliseconds: Self.milliseconds(lexicalTime), denseMilliseconds: Self.milliseconds(denseTime),
                           totalMilliseconds: Self.milliseconds(clock.now - start)))
        response.hybridMoments = hybridMoments
        response.unmatchedFilter = unmatchedFilter(scenario: request.scenario, tags: request.tags)
        return response
    }

    /// The filter values no chunk of this version carries, with the values it has instead.
    private func unmatchedFilter(scenario: String?, tags: [String]?) -> SearchResponse.UnmatchedFilter? {
        guard scenario != nil || tags?.isEmpty == false else { return nil }  // most searches
        var unmatched = SearchResponse.UnmatchedFilter()
        if let scenario, contents.scenarioCode[scenario] == nil {
            unmatched.scenario = scenario
            unmatched.scenarios = contents.scenarioNames.sorted()
        }
        var seen: Set<String> = []
        unmatched.tags = (tags ?? []).filter { contents.tagCode[$0] == nil && seen.insert($0).inserted }
        if !unmatched.tags.isEmpty {
            let wanted = Set(unmatched.tags.map { $0.lowercased() })
            unmatched.similarTags = contents.tagNames.filter { wanted.contains($0.lowercased()) }.sorted()
        }
        return unmatched.scenario == nil && unmatched.tags.isEmpty ? nil : unmatched
    }

    /// Whether `canary` (a known question whose answer a healthy index must find) finds every id
    /// it expects: its query run in its mode (`queryVector` nil for `lexical`, or without a
    /// model: then every mode answers lexically) in the top `k`, which above
    /// `SearchRequest.kRange` is the top 100, a stricter test. The publisher and the device both
    /// judge canaries here, so a version the publisher passes is one its devices accept.
    public func passes(_ canary: Canary, queryVector: [Float]?) -> Bool {
        guard let response = try? search(Self.request(for: canary), queryVector: queryVector) else { return false }
        return Set(canary.expect).isSubset(of: response.results.map(\.chunk.id))
    }

    /// The search `passes` runs for `canary`.
    public static func request(for canary: Canary) -> SearchRequest {
        SearchRequest(query: canary.query, k: min(canary.k, SearchRequest.kRange.upperBound),
                      mode: SearchRequest.Mode(rawValue: canary.mode) ?? .hybrid)
    }

    /// The chunk with `id`, or nil when the index has none.
    public func chunk(id: String) throws(IndexError) -> Chunk? {
        try pool.withConnection { (db) throws(IndexError) in
            let statement = try db.prepare("SELECT \(SnapshotSchema.chunkColumns) FROM chunks WHERE id = ?1")
            try statement.bind(id, at: 1)
            return try statement.step() ? ChunkRow.chunk(from: statement) : nil
        }
    }

    // MARK: Candidates

    /// Which rows pass the filters, or nil when every row does (rows an overlay removed are
    /// left to `IndexContents.isLive`).
    private func candidateMask(scenario: String?, tags required: [String]?) -> [Bool]? {
        let requiredTags = Array(Set(required ?? []))
        guard scenario != nil || !requiredTags.isEmpty else { return nil }
        // A tag no row carries lets nothing through.
        let tagCodes = requiredTags.compactMap { contents.tagCode[$0] }
        guard tagCodes.count == requiredTags.count else { return [Bool](repeating: false, count: contents.slots) }
        var allowed: Set<Int32>?
        if let scenario {
            allowed = Set([contents.scenarioCode[scenario], contents.scenarioCode[Self.generalScenario]].compactMap { $0 })
        }
        return (0..<contents.slots).map { row in
            (allowed?.contains(contents.scenario(row)) ?? true) && (tagCodes.isEmpty || contents.hasTags(row, tagCodes))
        }
    }

    /// `mask` with the rows an overlay removed left out too, or nil when every row counts.
    func liveMask(_ mask: [Bool]?) -> [Bool]? {
        guard contents.hasRemoved else { return mask }
        return (0..<contents.slots).map { row in contents.isLive(row) && (mask?[row] ?? true) }
    }

    // MARK: Dense

    /// The best dense matches at or above the floor, whether the scores are degenerate, and
    /// the cosines of the rows scored: exact (from the file's float32 vectors) for the rows in
    /// `exact`, estimated from the int8 codes for the others (every row in a flat pass; in a
    /// narrowed one only the rows rescored). `moments` is the dense score's over every row when
    /// the rows were narrowed for a hybrid query (from a sample); else nil, and a hybrid caller
    /// takes them from `scores.all`.
    struct DenseCandidates: Sendable {
        var list: [ScoredRow] = []
        var isDegenerate = false
        var scores = RowScores()
        var exact: Set<Int> = []
        var moments: ScoreMoments?
    }

    /// Cosines by row number: every row's after a flat pass; after a narrowed one only those of
    /// the few hundred rows set (a million-row array would cost a 4 MB allocation a query).
    struct RowScores: Sendable {
        /// Every row's cosine (a flat pass), else empty.
        private(set) var all: [Float] = []
        private var some: [Int: Float] = [:]

        init() {}
        init(all: [Float]) { self.all = all }

        /// A row's cosine; 0 for a row a narrowed pass did not set.
        subscript(row: Int) -> Float {
            get { all.isEmpty ? some[row] ?? 0 : all[row] }
            set {
                if all.isEmpty { some[row] = newValue } else { all[row] = newValue }
            }
        }
    }

    /// Rows rescored exactly per dense query: `rescoreFactor` × the list's depth (or the
    /// degenerate window, if wider), at least `minimumRescored`. The codes' estimate of a cosine
    /// is within about 0.001 of it, so a row of the exact top list is missed only if the
    /// estimates put four times the list's length of rows ahead of it.
    static let rescoreFactor = 4
    static let minimumRescored = 256
    /// The fewest rows the sign bits keep (`RankingConfiguration.shortlistFraction`).
    public static let minimumShortlist = 800
    /// Rows whose estimated scores give a narrowed hybrid query's dense moments: every
    /// (n / momentSample)-th row, the same rows for every query. The standard error of the
    /// standard deviation taken from them is about 0.6% of it (σ / √(2m) for normal scores); the
    /// mean does not move the ranking (it shifts every candidate's standardised score alike).
    public static let momentSample = 16_384

    /// - Parameter moments: whether a narrowed search also estimates the moments (hybrid).
    private func dense(_ query: [Float], floor: Float, limit: Int, mask: [Bool]?, moments wanted: Bool) throws(IndexError) -> DenseCandidates {
        let narrowed = narrowsDense && mask == nil
        let window = max(1, configuration.degenerateWindow)
        // The rows the codes rank best, rescored from the file: as many for any k up to the
        // largest (a dense answer's first n results are the k = n answer's; the estimates of
        // near rows differ by less than their error, so a shortlist cut by k would not be).
        let deepest = max(limit, SearchRequest.kRange.upperBound, window)
        var shortlist = TopSelection(capacity: max(Self.minimumRescored, Self.rescoreFactor * deepest))
        var scores: RowScores
        var moments: ScoreMoments?
        func offer(_ row: Int, _ estimate: Float) {
            let score = Double(estimate)
            if shortlist.admits(score) { shortlist.offer(ScoredRow(row: row, id: contents.id(row), score: score)) }
        }
        if narrowed {
            scores = RowScores()
            let rows = signShortlist(query)
            let estimates = similarities(query, rows: rows)
            // The best estimates (ties to the lower row: the rows are ascending, so to the lower
            // position), chosen in one pass, as positions in `rows`.
            var chosen = [Int32](repeating: 0, count: min(shortlist.capacity, rows.count))
            let positions = Array(0..<Int32(rows.count))
            chosen.removeLast(chosen.count - cairn_top_scores(estimates, positions, rows.count, chosen.count, &chosen))
            for position in chosen.map(Int.init) {
                let row = Int(rows[position])
                scores[row] = estimates[position]
                offer(row, estimates[position])
            }
            if wanted { moments = sampledMoments(query) }
        } else {
            let all = similarities(query)
            // The shortlist's last estimate, found in one pass: a row below it cannot enter, so
            // only rows at or above it are offered (ties among them still go by id). The rows a
            // query may not return are set to -∞ first (a copy only then), so a finite last
            // estimate leaves them out; -∞ (fewer rows than the list, or a NaN) offers every row
            // it may return.
            let filtered = contents.hasRemoved || mask != nil
            func allowed(_ row: Int) -> Bool { !filtered || contents.isLive(row) && mask?[row] ?? true }
            var ranked = all
            if filtered { for row in 0..<contents.slots where !allowed(row) { ranked[row] = -.infinity } }
            let last = cairn_kth_highest(ranked, ranked.count, shortlist.capacity)
            for row in 0..<contents.slots where last == -.infinity ? allowed(row) : ranked[row] >= last { offer(row, all[row]) }
            scores = RowScores(all: all)
        }
        let rescored = shortlist.sorted.map(\.row)
        try rescore(rescored, query: query, into: &scores)
        var top: [Float] = []  // the best `degenerateWindow` candidate scores, before the floor
        var lowest = 0  // index in `top` of its smallest score, once `top` is full
        var best = TopSelection(capacity: limit)
        for row in rescored {
            let score = scores[row]
            if top.count < window {
                top.append(score)
                if top.count == window { lowest = Self.indexOfMinimum(top) }
            } else if top[lowest] < score {
                top[lowest] = score
                lowest = Self.indexOfMinimum(top)
            }
            if score >= floor, best.admits(Double(score)) {
                best.offer(ScoredRow(row: row, id: contents.id(row), score: Double(score)))
            }
        }
        let degenerate = RankFusion.isDegenerate(topScores: top, minimum: configuration.degenerateMinimumScore,
                                                 maximumSpread: configuration.degenerateMaximumSpread)
        return DenseCandidates(list: best.sorted, isDegenerate: degenerate, scores: scores, exact: Set(rescored), moments: moments)
    }

    /// The base rows file and the overlay's (if any), each with the first row number it holds.
    private var files: [(file: RowFile, first: Int)] {
        [(contents.base, 0)] + (contents.overlay.map { [($0, contents.base.count)] } ?? [])
    }

    /// The live rows whose signs differ least from the query's: the `shortlistFraction` share
    /// of the index (at least `minimumShortlist`), those at a smaller distance than the last one
    /// kept first, then rows at that distance in row order (so the same query keeps the same
    /// rows), ascending.
    private func signShortlist(_ query: [Float]) -> [Int32] {
        let n = contents.slots, words = RowFile.Layout.signWords(meta.dimension)
        let size = min(count, max(Self.minimumShortlist, Int(Double(count) * configuration.shortlistFraction)))
        var querySigns = [UInt64](repeating: 0, count: words)
        cairn_sign_bits_f32(query, Int32(meta.dimension), &querySigns)
        var distances = [UInt16](repeating: 0, count: n)
        querySigns.withUnsafeBufferPointer { querySigns in
            distances.withUnsafeMutableBufferPointer { distances in
                for (file, first) in files where file.count > 0 {
                    let operands = SignOperands(signs: file.signs.baseAddress!, query: querySigns.baseAddress!,
                                                distances: distances.baseAddress! + first)
                    Self.splitRows(file.count, rowsPerThread: Self.signRowsPerThread) { first, count in
                        cairn_hamming(operands.signs, first, count, Int32(words), operands.query, operands.distances)
                    }
                }
            }
        }
        // Rows an overlay removed: farther than any row can be, so never kept.
        let removed = UInt16(64 * words + 1)
        for row in contents.overlay?.removed ?? UnsafeBufferPointer(start: nil, count: 0) { distances[Int(row)] = removed }
        var rows = [Int32](repeating: 0, count: size)
        let kept = cairn_select_nearest(distances, n, size, Int32(removed) - 1, &rows)
        rows.removeLast(size - kept)
        return rows
    }

    /// Rows below which one thread compares a whole index's signs: a row's comparison reads 48
    /// bytes where its scoring reads 384, so a helper pays off only from 10 × `rowsPerThread`.
    static let signRowsPerThread = 200_000

    /// The dense score's moments over every row, from the estimates of its sampled rows.
    private func sampledMoments(_ query: [Float]) -> ScoreMoments {
        let base = sample.base
        var estimates = [Float](repeating: 0, count: base.rows.count + sample.overlayRows.count)
        estimates.withUnsafeMutableBufferPointer { y in
            for (codes, scales, first) in [(base.codes, base.scales, 0), (sample.overlayCodes, sample.overlayScales, base.rows.count)] {
                codes.withUnsafeBufferPointer { codes in
                    scales.withUnsafeBufferPointer { scales in
                        Self.scan(codes: codes, scales: scales, query: query, into: y.baseAddress.map { $0 + first },
                                  rowsPerThread: Self.momentRowsPerThread)
                    }
                }
            }
        }
        return ScoreMoments(sample: ScoreMoments(scores: estimates, mask: sample.mask), of: count)
    }

    /// Sampled rows below which one thread estimates the moments (the sample's 16,384 rows,
    /// 6 MB of codes, take about 0.5 ms on one).
    static let momentRowsPerThread = 4_096

    /// The rows the dense moments are estimated from: about `momentSample` live rows spread
    /// evenly over the index (every live row of a smaller one). These are the base file's even
    /// sample (`RowFile.evenSample`: copied once per file and shared by every version served
    /// over it) less the rows the overlay removed, and the overlay's rows at the base's rate.
    /// A version that a delta derives thus copies only its overlay's sampled rows. (Until
    /// 2026-11-28 each version copied its own sample, whose rows shifted with the overlay's
    /// size: at a million rows 16,384 reads over 384 MB of codes and a fresh 6 MB block, 5-24 ms
    /// of the open after a delta.)
    struct MomentSample: Sendable {
        /// The base file's even sample, shared.
        let base: RowFile.EvenSample
        /// The overlay's sampled rows (numbered among every row), their codes and scales.
        let overlayRows: [Int]
        let overlayCodes: [Int8]
        let overlayScales: [Float]
        /// Which of the base's sampled rows, then the overlay's, this version holds; nil when it
        /// holds them all.
        let mask: [Bool]?

        /// No rows (an index that does not narrow).
        init() {
            (base, overlayRows, overlayCodes, overlayScales, mask) = (RowFile.EvenSample(rows: [], codes: [], scales: []), [], [], [], nil)
        }

        init(_ contents: IndexContents) {
            let baseFile = contents.base
            base = baseFile.evenSample(SearchIndex.momentSample)
            let overlayCount = contents.overlay?.count ?? 0
            // The base's rate: every overlay row while the base is sampled whole.
            let taken = base.rows.count < baseFile.count ? overlayCount * base.rows.count / baseFile.count : overlayCount
            overlayRows = (0..<taken).map { baseFile.count + $0 * overlayCount / taken }.filter(contents.isLive)
            (overlayCodes, overlayScales) = contents.overlay?.copy(overlayRows.lazy.map { $0 - baseFile.count }) ?? ([], [])
            let live = base.rows.map { contents.isLive(Int($0)) }
            mask = live.allSatisfy { $0 } ? nil : live + repeatElement(true, count: overlayRows.count)
        }
    }

    /// The estimates of `rows` (ascending) from their int8 codes, in that order, over the
    /// caller and the worker team's threads for a long list (30,000 rows at a million).
    private func similarities(_ query: [Float], rows: [Int32]) -> [Float] {
        var scores = [Float](repeating: 0, count: rows.count)
        guard !rows.isEmpty else { return scores }
        let d = meta.dimension, base = contents.base
        // The rows of each file are a run of the list: the base's first, then the overlay's
        // (given to its file as its own row numbers).
        let split = rows.firstIndex { Int($0) >= base.count } ?? rows.count
        let local = rows[split...].map { $0 - Int32(base.count) }
        rows.withUnsafeBufferPointer { rows in
            local.withUnsafeBufferPointer { local in
                query.withUnsafeBufferPointer { x in
                    scores.withUnsafeMutableBufferPointer { y in
                        var runs = [(file: base, rows: rows.baseAddress!, start: 0, count: split)]
                        if let overlay = contents.overlay, let first = local.baseAddress {
                            runs.append((overlay, first, split, local.count))
                        }
                        for run in runs where run.count > 0 {
                            let operands = ListOperands(codes: run.file.codes.baseAddress!, scales: run.file.scales.baseAddress!,
                                                        rows: run.rows, query: x.baseAddress!, scores: y.baseAddress! + run.start)
                            Self.splitRows(run.count, rowsPerThread: Self.listRowsPerThread) { first, count in
                                cairn_similarities_i8_rows(operands.codes, operands.scales, operands.rows + first, count, Int32(d),
                                                           operands.query, operands.scores + first)
                            }
                        }
                    }
                }
            }
        }
        return scores
    }

    /// Rows of a list below which one thread scores it: a listed row's codes are a random read.
    static let listRowsPerThread = 5_000

    private static func indexOfMinimum(_ values: [Float]) -> Int {
        values.indices.min { values[$0] < values[$1] } ?? 0
    }

    /// Every row's cosine with the query, estimated from its int8 codes (all vectors are unit
    /// length; rows an overlay removed are scored too, and skipped by the caller), over the
    /// caller and the worker team's threads for a large index.
    private func similarities(_ query: [Float]) -> [Float] {
        var scores = [Float](repeating: 0, count: contents.slots)
        scores.withUnsafeMutableBufferPointer { y in
            for (file, first) in files where file.count > 0 {
                Self.scan(codes: file.codes, scales: file.scales, query: query, into: y.baseAddress! + first,
                          rowsPerThread: Self.rowsPerThread)
            }
        }
        return scores
    }

    /// y[r] = the estimate of row r of `codes` (`query.count` a row) and `scales`, for every
    /// row, over the caller and the worker team's threads from 2 × `rowsPerThread` rows.
    private static func scan(codes: UnsafeBufferPointer<Int8>, scales: UnsafeBufferPointer<Float>, query: [Float],
                             into y: UnsafeMutablePointer<Float>?, rowsPerThread: Int) {
        guard let y, let codesStart = codes.baseAddress, let scalesStart = scales.baseAddress else { return }
        let d = query.count
        query.withUnsafeBufferPointer { x in
            let operands = ScanOperands(codes: codesStart, scales: scalesStart, query: x.baseAddress!, scores: y)
            splitRows(scales.count, rowsPerThread: rowsPerThread) { first, count in
                cairn_similarities_i8(operands.codes, operands.scales, first, count, Int32(d), operands.query, operands.scores)
            }
        }
    }

    /// Rows below which one thread scores a whole index (waking a helper costs more).
    static let rowsPerThread = 20_000

    /// Runs `body(first, count)` over `n` rows cut into equal ranges, `rangesPerThread` for each
    /// thread of the worker team (one range below 2 × `rowsPerThread` rows), and returns when
    /// all are done. The threads claim ranges as they go, so when the lexical half of a hybrid
    /// query shares a core with one of them, the other takes more of the pass instead of
    /// waiting for it.
    private static func splitRows(_ n: Int, rowsPerThread: Int, rangesPerThread: Int = 4,
                                  _ body: @escaping @Sendable (Int, Int) -> Void) {
        let threads = n >= rowsPerThread * 2 ? min(WorkerTeam.shared.width, n / rowsPerThread) : 1
        let parts = threads > 1 ? threads * max(1, rangesPerThread) : 1
        WorkerTeam.shared.run(chunks: parts) { part in
            let first = n * part / parts, end = n * (part + 1) / parts
            body(first, end - first)
        }
    }

    /// Replaces the scores of `rows` with their exact cosines, from the float32 vectors stored
    /// in the file: a lookup by rowid each, on the caller and the worker team's threads (one
    /// connection each) for the 400 or more rows of a fused query.
    private func rescore(_ rows: [Int], query: [Float], into scores: inout RowScores) throws(IndexError) {
        guard !rows.isEmpty else { return }
        // Each range's cosines, by the range's first position in `rows`.
        let parts = Mutex([(first: Int, cosines: Result<[Float], IndexError>)]())
        // One range a thread: each range takes a connection and prepares its statement.
        Self.splitRows(rows.count, rowsPerThread: Self.rescoredPerThread, rangesPerThread: 1) { [self] first, count in
            let cosines = Result { () throws(IndexError) in try exactCosines(rows[first ..< first + count], query: query) }
            parts.withLock { $0.append((first, cosines)) }
        }
        for part in parts.withLock({ $0 }) {
            for (offset, cosine) in try part.cosines.get().enumerated() { scores[rows[part.first + offset]] = cosine }
        }
    }

    /// Rows below which one thread rescores them (each a seek in the B-tree): a hybrid
    /// query's 400, and the 60 to 100 of its lexical list that dense did not rescore, are split.
    static let rescoredPerThread = 40

    /// The exact cosines of `rows` with the query, in their order. Each vector is read through
    /// one incremental-blob handle moved from row to row (`sqlite3_blob_reopen`): no statement
    /// is stepped, and SQLite keeps the row's overflow chain at hand, so the vector, stored after
    /// the chunk's text, is read without walking the pages before it.
    private func exactCosines(_ rows: ArraySlice<Int>, query: [Float]) throws(IndexError) -> [Float] {
        let d = meta.dimension
        return try pool.withConnection { (db) throws(IndexError) -> [Float] in
            var cosines: [Float] = []
            cosines.reserveCapacity(rows.count)
            var vector = [Float](repeating: 0, count: d)
            var blob: OpaquePointer?
            defer { sqlite3_blob_close(blob) }
            for row in rows {
                let rowid = contents.rowid(row)
                let rc = blob == nil ? sqlite3_blob_open(db.handle, "main", "chunks", "embedding", rowid, 0, &blob)
                    : sqlite3_blob_reopen(blob, rowid)
                guard rc == SQLITE_OK else {
                    // SQLITE_ERROR: no row with that rowid.
                    throw rc == SQLITE_ERROR ? IndexError(.snapshotMalformed, "a chunk disappeared from the snapshot while it was open")
                        : db.error("cannot read a stored vector", rc)
                }
                guard sqlite3_blob_bytes(blob) == Int32(d * 4) else {
                    throw IndexError(.dimensionMismatch, "a stored vector does not have the snapshot's dimension")
                }
                let read = vector.withUnsafeMutableBytes { sqlite3_blob_read(blob, $0.baseAddress, Int32(d * 4), 0) }
                guard read == SQLITE_OK else { throw db.error("cannot read a stored vector", read) }
                cosines.append(vector.withUnsafeBufferPointer { v in
                    query.withUnsafeBufferPointer { cairn_dot_f32(v.baseAddress, $0.baseAddress, Int32(d)) }
                })
            }
            return cosines
        }
    }

    // MARK: Results

    private func fetchChunks(rows: [Int], db: Database) throws(IndexError) -> [Chunk] {
        let statement = try db.prepare("SELECT \(SnapshotSchema.chunkColumns) FROM chunks WHERE rowid = ?1")
        var chunks: [Chunk] = []
        for row in rows {
            statement.reset()
            try statement.bind(contents.rowid(row), at: 1)
            guard try statement.step() else {
                throw IndexError(.snapshotMalformed, "a chunk disappeared from the snapshot while it was open")
            }
            chunks.append(try ChunkRow.chunk(from: statement))
        }
        return chunks
    }

    private static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1_000 + Double(attoseconds) / 1e15
    }
}

/// One lexical retrieval started on another thread; `result()` waits for it.
private final class LexicalTask: Sendable {
    private let work: SideWork<Result<(SearchIndex.LexicalCandidates, Duration), IndexError>>

    init(index: SearchIndex, query: String, limit: Int, mask: [Bool]?) {
        work = SideWork {
            let clock = ContinuousClock()
            let start = clock.now
            return Result { () throws(IndexError) in (try index.lexical(query, limit: limit, mask: mask), clock.now - start) }
        }
    }

    func wait() { _ = work.wait() }

    func result() throws(IndexError) -> (SearchIndex.LexicalCandidates, Duration) {
        try work.wait().get()
    }
}

/// The pointers one dense pass shares with the worker team's threads.
private struct ScanOperands: @unchecked Sendable {
    // @unchecked: the parts only read codes, scales and query, write disjoint ranges of scores,
    // and `WorkerTeam.run` returns only after all of them have finished.
    let codes: UnsafePointer<Int8>
    let scales: UnsafePointer<Float>
    let query: UnsafePointer<Float>
    let scores: UnsafeMutablePointer<Float>
}

/// The pointers one pass over the sign bits shares with the worker team's threads.
private struct ListOperands: @unchecked Sendable {
    // @unchecked: as `ScanOperands` (disjoint ranges of the list's scores written).
    let codes: UnsafePointer<Int8>
    let scales: UnsafePointer<Float>
    let rows: UnsafePointer<Int32>
    let query: UnsafePointer<Float>
    let scores: UnsafeMutablePointer<Float>
}

private struct SignOperands: @unchecked Sendable {
    // @unchecked: as `ScanOperands` (disjoint ranges of distances written).
    let signs: UnsafePointer<UInt64>
    let query: UnsafePointer<UInt64>
    let distances: UnsafeMutablePointer<UInt16>
}
