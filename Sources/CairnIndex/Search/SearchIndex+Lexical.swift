import CairnThreads
import Foundation

extension SearchIndex {
    /// The best lexical matches, and the moments of the lexical score over every row the filters
    /// let through (0 for a row that does not match).
    struct LexicalCandidates: Sendable {
        var list: [ScoredRow] = []
        var moments = ScoreMoments()
        /// Whether the list came from a pruned search (`prunedLexical`).
        var pruned = false
    }

    func lexical(_ query: String, limit: Int, mask: [Bool]?) throws(IndexError) -> LexicalCandidates {
        let searched = LexicalQuery.searchTokens(for: query, stopWords: configuration.stopWords,
                                                 maximumTokens: configuration.maximumQueryTokens)
        guard !searched.isEmpty else { return LexicalCandidates() }
        return try pool.withConnection { (db) throws(IndexError) -> LexicalCandidates in
            let (tokens, counts) = Self.informative(searched, counts: try documentCounts.counts(of: searched, db: db), rows: count,
                                                    keep: configuration.lexicalWords)
            if mask == nil, count > configuration.approximateLexicalAbove, tokens.count > 1 {
                return try prunedLexical(tokens, counts: counts, limit: limit, db: db)
            }
            return try fullLexical(tokens, counts: counts, limit: limit, mask: mask, db: db)
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

    /// A batch's rows beyond which its two halves of the rowids are scored at once, on this
    /// thread and another (a hybrid query's other core is free again once its dense part is done).
    static let splitLexicalRows: Int64 = 20_000

    /// The same list without scoring every matching row, by MaxScore over FTS5: the tokens are
    /// cut into essential ones (the rarest) and the others, whose BM25 contribution to any row is
    /// below IDF × (k1 + 1). Only the rows holding an essential token are scored, each with every
    /// token (the others are sought in those rows alone: the expression `E OR (E AND F)`, whose
    /// repeated phrases count once). When the list is full and its last score is at least the
    /// sum of the others' bounds, no row without an essential token can enter it, and the list is
    /// exactly the full search's. Otherwise the rarest of the others become essential too (one
    /// word, then groups that double), and only their rows that hold no earlier essential word
    /// are scored and added (`N NOT (E)`), so each matching row is scored at most once; when
    /// every word has become essential, every matching row has been. The moments of the rows not
    /// scored are estimated (`estimatedMoments`), those of the rows scored are exact.
    private func prunedLexical(_ tokens: [String], counts: [Int64], limit: Int,
                               db: Database) throws(IndexError) -> LexicalCandidates {
        let n = Double(count)
        let idf = counts.map { count in
            let value = log((n - Double(count) + 0.5) / (Double(count) + 0.5))
            return value <= 0 ? 1e-6 : value
        }
        let bound = idf.map { $0 * (configuration.bm25K1 + 1) }
        // The others, most frequent first: the rarest becomes essential first.
        var others = tokens.indices.sorted { counts[$0] != counts[$1] ? counts[$0] > counts[$1] : $0 < $1 }
        var essential: [Int] = []
        var best = TopSelection(capacity: limit)
        var moments = ScoreMoments()
        // Per token: the scored rows holding it, and the sums of its tf part over them.
        var seen = [Int](repeating: 0, count: tokens.count)
        var sums = [Double](repeating: 0, count: tokens.count), squares = sums
        // Words become essential in groups that double (1, 1, 2, 4, …): a query of a few words
        // moves them one at a time, a query of thirty runs at most six batches.
        var group = 1
        while !others.isEmpty {
            let next = Array(others.suffix(min(group, others.count)).reversed())
            others.removeLast(next.count)
            if !essential.isEmpty { group *= 2 }
            // The rows of `next` that hold no earlier essential word, each scored with `next` and
            // the others (the earlier essential words are absent from them).
            let earlier = essential.map { tokens[$0] }
            let rows = "(" + LexicalQuery.expression(next.map { tokens[$0] }) + ")"
                + (earlier.isEmpty ? "" : " NOT (" + LexicalQuery.expression(earlier) + ")")
            let expression = others.isEmpty ? rows
                : "(\(rows)) OR ((\(rows)) AND (" + LexicalQuery.expression(others.map { tokens[$0] }) + "))"
            let ignored = [Int64](repeating: BM25Function.ignoredPhrase, count: earlier.count)
            let repeated = [Int64](repeating: BM25Function.ignoredPhrase, count: next.count)
            let phraseCounts = next.map { counts[$0] } + ignored
                + (others.isEmpty ? [] : repeated + ignored + others.map { counts[$0] })
            let first = 2 * (next.count + earlier.count)
            let batchRows = next.reduce(Int64(0)) { $0 + counts[$1] }
            var batches: [ScoredBatch] = []
            if batchRows >= Self.splitLexicalRows, let range = contents.rowidRange, range.count > 1 {
                let middle = range.lowerBound + (range.upperBound - range.lowerBound) / 2
                let (phrases, others) = (phraseCounts, others.count)
                let upper = SideWork { [self] in
                    Result { () throws(IndexError) in
                        try pool.withConnection { (db) throws(IndexError) in
                            try scoreBatch(expression, counts: phrases, firstNonEssential: first, nonEssential: others, limit: limit,
                                           rowids: (middle + 1)...range.upperBound, db: db)
                        }
                    }
                }
                let lower = Result { () throws(IndexError) in
                    try scoreBatch(expression, counts: phraseCounts, firstNonEssential: first, nonEssential: others, limit: limit,
                                   rowids: range.lowerBound...middle, db: db)
                }
                let higher = upper.wait()
                batches = [try lower.get(), try higher.get()]
            } else {
                batches = [try scoreBatch(expression, counts: phraseCounts, firstNonEssential: first, nonEssential: others.count,
                                          limit: limit, rowids: nil, db: db)]
            }
            for batch in batches {
                moments.add(batch.moments)
                for row in batch.best where best.admits(row.score) { best.offer(row) }
                for (index, token) in others.enumerated() {
                    seen[token] += batch.rows[index]
                    sums[token] += batch.sums[index]
                    squares[token] += batch.squares[index]
                }
            }
            essential += next
            let last = best.rows.count == limit ? best.sorted.last!.score : 0
            // Full, with no room left for a row holding only others: exact.
            if last > 0, last >= others.reduce(0, { $0 + bound[$1] }) { break }
        }
        let scored = moments.count
        moments.add(estimatedMoments(others: others, idf: idf, counts: counts, seen: seen, sums: sums, squares: squares,
                                     scored: scored))
        moments.addZeros(count - scored)
        return LexicalCandidates(list: best.sorted, moments: moments, pruned: !others.isEmpty)
    }

    /// The lexical score's sum and sum of squares over the rows that hold some of the `others`
    /// tokens but no essential one (not scored): each such token's rows less those scored that
    /// hold it, times its IDF and the mean (and mean square) of its tf part over the scored rows
    /// that hold it (over none: one occurrence in the content at the average length); tokens
    /// taken as independent in those rows. Only the spread of the lexical score enters a hybrid
    /// ranking (as the weight of its standardised score, docs/quality.md), and a few percent of
    /// error in it moves no answer by more than that weight's own tolerance.
    private func estimatedMoments(others: [Int], idf: [Double], counts: [Int64], seen: [Int], sums: [Double],
                                  squares: [Double], scored: Int) -> ScoreMoments {
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
            for b in others.indices where a != b { square += means[a] * means[b] * rows[a] * rows[b] / rest }
        }
        // No rows counted: the caller counts every row it did not score as a zero.
        var moments = ScoreMoments()
        moments.add(count: 0, sum: sum, squares: square)
        return moments
    }

    /// The tokens worth matching: BM25 gives a token found in half the rows or more an IDF of
    /// 1e-6 (FTS5 clamps log((N - n + 0.5) / (n + 0.5)) ≤ 0 to that), so it moves no score by
    /// more than a few millionths, yet matching it walks most of the index ("study" in a medical
    /// corpus). Such tokens are left out unless nothing else remains. Of the rest, the `keep`
    /// rarest (the highest IDFs; ties to the earlier token) in their query order
    /// (`RankingConfiguration.lexicalWords`).
    static func informative(_ tokens: [String], counts: [Int64], rows: Int, keep: Int = .max) -> ([String], [Int64]) {
        var kept = zip(tokens, counts).filter { 2 * $0.1 < Int64(rows) }
        if kept.isEmpty { kept = Array(zip(tokens, counts)) }
        if kept.count > keep {
            let rarest = Set(kept.indices.sorted { kept[$0].1 != kept[$1].1 ? kept[$0].1 < kept[$1].1 : $0 < $1 }.prefix(max(1, keep)))
            kept = kept.indices.filter(rarest.contains).map { kept[$0] }
        }
        return (kept.map(\.0), kept.map(\.1))
    }
}
