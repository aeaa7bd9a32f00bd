import CairnThreads
import Foundation

extension SearchIndex {
    /// The best lexical matches, and the moments of the lexical score over every row the filters
    /// let through (0 for a row that does not match).
    struct LexicalCandidates: Sendable {
        var list: [ScoredRow] = []
        var moments = ScoreMoments()
        /// Whether the list came from a pruned search (`prunedLexical`), and whether its last
        /// batch was the rows of a cover (`covers`).
        var pruned = false
        var covered = false
        /// Whether every matching row was scored from FTS5's postings (`postingsLexical`).
        var fromPostings = false
    }

    func lexical(_ query: String, limit: Int, mask: [Bool]?) throws(IndexError) -> LexicalCandidates {
        let searched = LexicalQuery.searchTokens(for: query, stopWords: configuration.stopWords,
                                                 maximumTokens: configuration.maximumQueryTokens)
        guard !searched.isEmpty else { return LexicalCandidates() }
        return try pool.withConnection { (db) throws(IndexError) -> LexicalCandidates in
            let (tokens, counts) = Self.informative(searched, counts: try documentCounts.counts(of: searched, db: db), rows: count,
                                                    keep: configuration.lexicalWords)
            if mask == nil, count > configuration.approximateLexicalAbove {
                if counts.reduce(0, +) > Int64(clamping: configuration.lexicalPostingsAbove ?? count / 5),
                   let whole = try postingsLexical(tokens, counts: counts, limit: limit, db: db) {
                    return whole
                }
                if tokens.count > 1 { return try prunedLexical(tokens, counts: counts, limit: limit, db: db) }
            }
            let found = try fullLexical(tokens, counts: counts, limit: limit, mask: mask, db: db)
            // A filter may leave none of the rows the kept words match, while the rows it lets
            // through hold the common words left out: those answer rather than nothing.
            guard mask != nil, found.list.isEmpty, tokens.count < searched.count else { return found }
            let all = try documentCounts.counts(of: searched, db: db)
            return try fullLexical(searched, counts: all, limit: limit, mask: mask, db: db)
        }
    }

    /// Every row matching any token scored: the list and the moments exact.
    private func fullLexical(_ tokens: [String], counts: [Int64], limit: Int, mask: [Bool]?,
                             db: Database) throws(IndexError) -> LexicalCandidates {
        let rows = liveMask(mask).map { $0.lazy.filter { $0 }.count } ?? count
        // cairn_bm25 is FTS5's bm25() with row lengths from the rows files, each phrase's
        // document count from `documentCounts`, and the configuration's k1 and b (BM25Function.swift).
        let statement = try scoring(LexicalQuery.expression(tokens), counts: counts, db: db)
        var best = TopSelection(capacity: limit)
        var moments = ScoreMoments()
        while try statement.step() {
            let (rowid, score) = (statement.int64(at: 0), -statement.double(at: 1))
            // Without a filter every match counts, and only a row that can enter the list
            // needs its row number.
            if let mask, !(contents.row(rowid: rowid).map { mask[$0] } ?? false) { continue }
            moments.add(score)
            guard best.admits(score), let row = contents.row(rowid: rowid) else { continue }
            best.offer(ScoredRow(row: row, id: contents.id(row), score: score))
        }
        moments.addZeros(rows - moments.count)
        return LexicalCandidates(list: best.sorted, moments: moments)
    }

    /// Every row matching any token scored as `fullLexical` scores it (`cairn_bm25`'s formula,
    /// operations and order, phrase by phrase), but from FTS5's postings read one word at a
    /// time into a score per row (`FullTextPostings`) rather than through an FTS5 query: the
    /// list and the moments exact. Nil when the postings cannot be read so (a word of several
    /// tokens, a structure this reader does not know, a row without a length), and FTS5 is asked.
    func postingsLexical(_ tokens: [String], counts: [Int64], limit: Int, db: Database) throws(IndexError) -> LexicalCandidates? {
        guard let postings = try FullTextPostings.read(db), postings.rows > 0,
              let found = try FullTextPostings.terms(for: tokens, db: db) else { return nil }
        let terms = found.compactMap { $0 }
        guard terms.count == found.count else { return nil }
        let (k1, b) = (configuration.bm25K1, configuration.bm25B)
        let (titleWeight, contentWeight) = (configuration.titleWeight, configuration.contentWeight)
        let rows = Double(postings.rows), averageLength = Double(postings.tokens) / Double(postings.rows)
        guard let buffer = ScoreBuffer(count: contents.slots) else { return nil }
        defer { withExtendedLifetime(buffer) {} }
        let scores = buffer.scores
        var complete = true
        for (phrase, term) in terms.enumerated() {
            let idf = BM25Function.idf(rows: rows, hits: Double(counts[phrase]))
            let read = try postings.forEachRow(holding: term) { rowid, found in
                guard let row = contents.row(rowid: rowid) else { return }
                let length = contents.length(row)
                guard length >= 0 else { complete = false; return }
                // Each hit's weight added in turn, as cairn_bm25 adds them in position order.
                var frequency = 0.0
                for _ in 0..<found.title { frequency += titleWeight }
                for _ in 0..<found.content { frequency += contentWeight }
                for _ in 0..<found.other { frequency += 1.0 }
                scores[row] += idf * BM25Function.tfPart(frequency: frequency, length: Double(length), averageLength: averageLength, k1: k1, b: b)
            }
            guard read, complete else { return nil }
        }
        var best = TopSelection(capacity: limit)
        var moments = ScoreMoments()
        for (row, score) in scores.enumerated() where score > 0 {
            moments.add(score)
            guard best.admits(score) else { continue }
            best.offer(ScoredRow(row: row, id: contents.id(row), score: score))
        }
        moments.addZeros(count - moments.count)
        return LexicalCandidates(list: best.sorted, moments: moments, fromPostings: true)
    }

    /// The statement that scores the rows matching `expression` with `cairn_bm25`, `counts`
    /// giving each phrase's document count, `collector` (if any) bound as its last argument, and
    /// only the rows with rowids in `rowids` (all when nil).
    private func scoring(_ expression: String, counts: [Int64], collector: LexicalCollector? = nil,
                         rowids: ClosedRange<Int64>? = nil, db: Database) throws(IndexError) -> Statement {
        let statement = try db.prepare("SELECT rowid, \(BM25Function.name)(chunks_fts, ?1, ?2, ?4, ?5, ?6"
            + (collector == nil ? "" : ", ?7") + ") FROM chunks_fts WHERE chunks_fts MATCH ?3"
            + (rowids == nil ? "" : " AND rowid BETWEEN ?8 AND ?9"))
        try statement.bind(configuration.titleWeight, at: 1)
        try statement.bind(configuration.contentWeight, at: 2)
        try statement.bind(expression, at: 3)
        try statement.bind(BM25Function.encode(counts), at: 4)
        try statement.bind(configuration.bm25K1, at: 5)
        try statement.bind(configuration.bm25B, at: 6)
        if let collector { try BM25Function.bindCollector(collector, to: statement, at: 7) }
        if let rowids {
            try statement.bind(rowids.lowerBound, at: 8)
            try statement.bind(rowids.upperBound, at: 9)
        }
        return statement
    }

    /// What one pruned run scored: its best rows, the moments of every row it scored, and per
    /// non-essential phrase the `LexicalCollector`'s sums.
    struct ScoredBatch: Sendable {
        var best: [ScoredRow] = []
        var moments = ScoreMoments()
        var rows: [Int] = []
        var sums: [Double] = []
        var squares: [Double] = []
    }

    /// Scores the rows matching `expression` (with rowids in `rowids`, all when nil) on `db`.
    private func scoreBatch(_ expression: String, counts: [Int64], firstNonEssential: Int, nonEssential: Int, limit: Int,
                            rowids: ClosedRange<Int64>?, db: Database) throws(IndexError) -> ScoredBatch {
        let collector = LexicalCollector(firstNonEssential: firstNonEssential, phrases: nonEssential)
        let statement = try scoring(expression, counts: counts, collector: collector, rowids: rowids, db: db)
        var best = TopSelection(capacity: limit)
        var batch = ScoredBatch()
        while try statement.step() {
            let (rowid, score) = (statement.int64(at: 0), -statement.double(at: 1))
            batch.moments.add(score)
            guard best.admits(score), let row = contents.row(rowid: rowid) else { continue }
            best.offer(ScoredRow(row: row, id: contents.id(row), score: score))
        }
        (batch.best, batch.rows, batch.sums, batch.squares) = (best.rows, collector.rows, collector.sums, collector.squares)
        return batch
    }

    /// A batch's rows beyond which its two halves of the rowids are scored at once (`scoreBatches`).
    static let splitLexicalRows: Int64 = 20_000

    /// The same list without scoring every matching row, by MaxScore over FTS5: the tokens are
    /// cut into essential ones (the rarest) and the others, whose BM25 contribution to any row is
    /// below IDF × (k1 + 1). Only the rows holding an essential token are scored, each with every
    /// token (the others are sought in those rows alone: the expression `E OR (E AND F)`, whose
    /// repeated phrases count once). The rarest of the others become essential in turn, in
    /// groups of words that double as long as a word's rows are not many times the group's,
    /// and only their rows that hold no earlier essential word are scored and added
    /// (`N NOT (E)`), so each matching row is scored at most once.
    ///
    /// Once the list is full, its last score θ bounds what the rest must reach. When the others'
    /// bounds add up to less than θ, no row without an essential token can enter the list. When
    /// no other token can reach θ alone but some sets of them can (common words of similar
    /// weight: "cholesterol", "drugs", "breast", "cancer"), only the rows holding such a set can
    /// enter (`covers`); they are found by FTS5's AND, which seeks through the lists instead of
    /// scoring their union, and scored in one last batch. Either way the list is exactly the full
    /// search's; when every word has become essential, every matching row has been scored. The
    /// moments of the rows not scored are estimated (`estimatedMoments`), those of the rows
    /// scored are exact.
    private func prunedLexical(_ tokens: [String], counts: [Int64], limit: Int,
                               db: Database) throws(IndexError) -> LexicalCandidates {
        let n = Double(count)
        let idf = counts.map { BM25Function.idf(rows: n, hits: Double($0)) }
        let bound = idf.map { $0 * (configuration.bm25K1 + 1) }
        // The others, most frequent first: the rarest becomes essential first.
        var others = tokens.indices.sorted { counts[$0] != counts[$1] ? counts[$0] > counts[$1] : $0 < $1 }
        var essential: [Int] = []
        // Whether a cover's rows were scored, and the pairs of others among its sets (no row
        // left unscored holds both words of one), as `pairKey`s.
        var covered = false
        var coveredPairs: Set<Int> = []
        var group = 1
        var best = TopSelection(capacity: limit)
        var moments = ScoreMoments()
        // Per token: the scored rows holding it, and the sums of its tf part over them.
        var seen = [Int](repeating: 0, count: tokens.count)
        var sums = [Double](repeating: 0, count: tokens.count), squares = sums
        // The rows matching `expression` that hold no essential word (their phrases come last).
        func withoutEssential(_ expression: String) -> String {
            "(" + expression + ")" + (essential.isEmpty ? "" : " NOT (" + LexicalQuery.expression(essential.map { tokens[$0] }) + ")")
        }
        func add(_ batches: [ScoredBatch]) {
            for batch in batches {
                moments.add(batch.moments)
                for row in batch.best where best.admits(row.score) { best.offer(row) }
                for (index, token) in others.enumerated() {
                    seen[token] += batch.rows[index]
                    sums[token] += batch.sums[index]
                    squares[token] += batch.squares[index]
                }
            }
        }
        while !others.isEmpty {
            // Below the last score by a margin far above rounding: a bound reaching it keeps its rows.
            let threshold = best.rows.count == limit ? best.rows[0].score * (1 - 1e-9) : 0
            if threshold > 0 {
                // Full, with no room left for a row holding only others: exact.
                if others.reduce(0, { $0 + bound[$1] }) < threshold { break }
                if bound[others.last!] < threshold,
                   let covers = Self.covers(others, bound: bound, threshold: threshold, atMost: Self.maximumCovers) {
                    // The rows holding a set of others that could reach the list and no essential
                    // word, each scored with every other (its phrases in the sets are not scored).
                    let sets = covers.map { "(" + $0.map { LexicalQuery.quoted(tokens[$0]) }.joined(separator: " AND ") + ")" }
                    let expression = "(\(withoutEssential(sets.joined(separator: " OR ")))) AND ("
                        + LexicalQuery.expression(others.map { tokens[$0] }) + ")"
                    let ignored = [Int64](repeating: BM25Function.ignoredPhrase,
                                          count: covers.reduce(0) { $0 + $1.count } + essential.count)
                    let estimate = covers.reduce(0.0) { total, set in total + set.reduce(n) { $0 * Double(counts[$1]) / n } }
                    add(try scoreBatches(expression, counts: ignored + others.map { counts[$0] }, firstNonEssential: ignored.count,
                                         nonEssential: others.count, limit: limit, rows: Int64(estimate), db: db))
                    coveredPairs = Set(covers.filter { $0.count == 2 }.map { Self.pairKey($0[0], $0[1], of: tokens.count) })
                    covered = true
                    break
                }
            }
            // The rarest other, and after it the next rarest while their rows together stay
            // within those scored so far, or while the group is under its size (1, 1, 2, 4, …
            // words: a query of thirty words runs about six batches) and the word's rows are
            // not many times the group's (a rare word does not drag a common one in).
            let budget = Int64(max(4 * limit, moments.count))
            var next = [others.removeLast()]
            var batchRows = counts[next[0]]
            while let rarest = others.last,
                  batchRows + counts[rarest] <= budget || (next.count < group && counts[rarest] <= max(budget, 4 * batchRows)) {
                next.append(others.removeLast())
                batchRows += counts[rarest]
            }
            if !essential.isEmpty { group *= 2 }
            // The rows of `next` that hold no earlier essential word, each scored with `next` and
            // the others (the earlier essential words are absent from them).
            let rows = withoutEssential(LexicalQuery.expression(next.map { tokens[$0] }))
            let expression = others.isEmpty ? rows
                : "(\(rows)) OR ((\(rows)) AND (" + LexicalQuery.expression(others.map { tokens[$0] }) + "))"
            let ignored = [Int64](repeating: BM25Function.ignoredPhrase, count: essential.count)
            let repeated = [Int64](repeating: BM25Function.ignoredPhrase, count: next.count)
            let phraseCounts = next.map { counts[$0] } + ignored
                + (others.isEmpty ? [] : repeated + ignored + others.map { counts[$0] })
            add(try scoreBatches(expression, counts: phraseCounts, firstNonEssential: 2 * (next.count + essential.count),
                                 nonEssential: others.count, limit: limit, rows: batchRows, db: db))
            essential += next
        }
        let scored = moments.count
        moments.add(estimatedMoments(others: others, idf: idf, counts: counts, seen: seen, sums: sums, squares: squares,
                                     scored: scored, apart: coveredPairs))
        moments.addZeros(count - scored)
        return LexicalCandidates(list: best.sorted, moments: moments, pruned: !others.isEmpty, covered: covered)
    }

    /// One number for the unordered pair of tokens `a` and `b` of a query of `count` tokens.
    static func pairKey(_ a: Int, _ b: Int, of count: Int) -> Int {
        min(a, b) * count + max(a, b)
    }

    /// At most this many sets of words in a cover (`covers`); beyond it the rarest word becomes
    /// essential and the cover is sought again with fewer words.
    static let maximumCovers = 24

    /// The smallest sets of `words` whose bounds add up to `threshold` or more (none of them
    /// reaches it alone, the caller checks): a row holding none of these sets scores below it.
    /// Nil when there are more than `atMost`. Each set is found once, its words in decreasing
    /// bound, and is minimal: without its last (smallest) word it falls below the threshold, and
    /// without any other word further still.
    static func covers(_ words: [Int], bound: [Double], threshold: Double, atMost: Int) -> [[Int]]? {
        let order = words.sorted { bound[$0] != bound[$1] ? bound[$0] > bound[$1] : $0 < $1 }
        // What the words from each position on can still add.
        var rest = [Double](repeating: 0, count: order.count + 1)
        for index in order.indices.reversed() { rest[index] = rest[index + 1] + bound[order[index]] }
        var found: [[Int]] = [], current: [Int] = []
        func extend(from start: Int, sum: Double) -> Bool {
            for index in start..<order.count {
                guard sum + rest[index] >= threshold else { return true }
                current.append(order[index])
                defer { current.removeLast() }
                if sum + bound[order[index]] >= threshold {
                    found.append(current)
                    if found.count > atMost { return false }
                } else if !extend(from: index + 1, sum: sum + bound[order[index]]) {
                    return false
                }
            }
            return true
        }
        return extend(from: 0, sum: 0) ? found : nil
    }

    /// Scores the rows matching `expression` (about `rows` of them): past `splitLexicalRows`,
    /// the two halves of the rowids at once, on this thread and another (a hybrid query's other
    /// core is free again once its dense part is done).
    private func scoreBatches(_ expression: String, counts: [Int64], firstNonEssential: Int, nonEssential: Int, limit: Int,
                              rows: Int64, db: Database) throws(IndexError) -> [ScoredBatch] {
        guard rows >= Self.splitLexicalRows, let range = contents.rowidRange, range.count > 1 else {
            return [try scoreBatch(expression, counts: counts, firstNonEssential: firstNonEssential, nonEssential: nonEssential,
                                   limit: limit, rowids: nil, db: db)]
        }
        let middle = range.lowerBound + (range.upperBound - range.lowerBound) / 2
        let upper = SideWork { [self] in
            Result { () throws(IndexError) in
                try pool.withConnection { (db) throws(IndexError) in
                    try scoreBatch(expression, counts: counts, firstNonEssential: firstNonEssential, nonEssential: nonEssential,
                                   limit: limit, rowids: (middle + 1)...range.upperBound, db: db)
                }
            }
        }
        let lower = Result { () throws(IndexError) in
            try scoreBatch(expression, counts: counts, firstNonEssential: firstNonEssential, nonEssential: nonEssential,
                           limit: limit, rowids: range.lowerBound...middle, db: db)
        }
        let higher = upper.wait()
        return [try lower.get(), try higher.get()]
    }

    /// The lexical score's sum and sum of squares over the rows that hold some of the `others`
    /// tokens but no essential one (not scored): each such token's rows less those scored that
    /// hold it, times its IDF and the mean (and mean square) of its tf part over the scored rows
    /// that hold it (over none: one occurrence in the content at the average length); tokens
    /// taken as independent in those rows, except the pairs in `apart` (`pairKey`s of a cover's
    /// pairs: no row left holds both). Only the spread of the lexical score enters a hybrid
    /// ranking (as the weight of its standardised score, docs/quality.md), and a few percent of
    /// error in it moves no answer by more than that weight's own tolerance.
    private func estimatedMoments(others: [Int], idf: [Double], counts: [Int64], seen: [Int], sums: [Double],
                                  squares: [Double], scored: Int, apart: Set<Int> = []) -> ScoreMoments {
        let k1 = configuration.bm25K1, weight = configuration.contentWeight
        let single = weight * (k1 + 1) / (weight + k1)
        var rows: [Double] = [], means: [Double] = [], sum = 0.0, square = 0.0
        for token in others {
            let hits = seen[token]
            let mean = hits > 0 ? sums[token] / Double(hits) : single
            let meanSquare = hits > 0 ? squares[token] / Double(hits) : single * single
            let unscored = Double(max(0, counts[token] - Int64(hits)))
            rows.append(unscored)
            means.append(idf[token] * mean)
            sum += idf[token] * mean * unscored
            square += idf[token] * idf[token] * meanSquare * unscored
        }
        let rest = Double(max(1, count - scored))
        for a in others.indices {
            for b in others.indices where a != b && !apart.contains(Self.pairKey(others[a], others[b], of: idf.count)) {
                square += means[a] * means[b] * rows[a] * rows[b] / rest
            }
        }
        // No rows counted: the caller counts every row it did not score as a zero.
        var moments = ScoreMoments()
        moments.add(count: 0, sum: sum, squares: square)
        return moments
    }

    /// The tokens worth matching: BM25 gives a token found in half the rows or more an IDF of
    /// 1e-6 (FTS5 clamps log((N - n + 0.5) / (n + 0.5)) ≤ 0 to that), so it moves no score by
    /// more than a few millionths, yet matching it walks most of the index ("study" in a medical
    /// corpus). Such tokens are left out unless nothing that matches a row remains (a typo or
    /// an unknown word beside a common one must not leave the answer empty; with a filter,
    /// `lexical` searches every token again when the kept ones match no row it lets through).
    /// Of the rest, the `keep` rarest (the highest IDFs; ties to the earlier token) in their query order
    /// (`RankingConfiguration.lexicalWords`).
    static func informative(_ tokens: [String], counts: [Int64], rows: Int, keep: Int = .max) -> ([String], [Int64]) {
        var kept = zip(tokens, counts).filter { 2 * $0.1 < Int64(rows) }
        if !kept.contains(where: { $0.1 > 0 }) { kept = Array(zip(tokens, counts)) }
        if kept.count > keep {
            let rarest = Set(kept.indices.sorted { kept[$0].1 != kept[$1].1 ? kept[$0].1 < kept[$1].1 : $0 < $1 }.prefix(max(1, keep)))
            kept = kept.indices.filter(rarest.contains).map { kept[$0] }
        }
        return (kept.map(\.0), kept.map(\.1))
    }
}

/// `postingsLexical`'s score per row, zeroed, in an anonymous mapping of its own that goes back
/// to the system when the query ends. From the heap, glibc kept each thread's 8 MB block (at a
/// million rows) once its mmap threshold had risen to that size: cairnd's RssAnon after the
/// bench's worst queries was 82-90 MiB against 33 without the postings (ab1m device). The
/// mapping is populated when it is made (`MAP_POPULATE`): faulted in page by page by the scores'
/// scattered writes, it made those queries 56-60 ms against the heap's 31-39.
final class ScoreBuffer {
    let scores: UnsafeMutableBufferPointer<Double>
    private let bytes: Int

    init?(count: Int) {
        bytes = max(1, count) * MemoryLayout<Double>.stride
        guard let memory = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0),
              memory != MAP_FAILED else { return nil }
        scores = UnsafeMutableBufferPointer(start: memory.assumingMemoryBound(to: Double.self), count: count)
    }

    deinit {
        munmap(scores.baseAddress, bytes)
    }
}
