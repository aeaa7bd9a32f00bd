import CSQLite
import Foundation

/// FTS5's own postings of `chunks_fts`, read straight from its `%_data` records, for scoring
/// every row that holds any word of a long query one word at a time (`SearchIndex.postingsLexical`)
/// instead of through an FTS5 query, whose OR merges the words' lists and calls `cairn_bm25` row
/// by row through SQLite's VM (0.3–0.5 µs a row at a million rows; docs/scale.md).
///
/// The format is FTS5's on-disk format (version 4 in `%_config`, the legacy structure record),
/// as `ext/fts5/fts5_index.c` describes it: a structure record (id 10) lists the segments by
/// level; each segment's leaves are records `segid << 37 | page`; a leaf holds terms (the main
/// index's prefixed by "0", each after the first on a page sharing a prefix with the one
/// before) and their doclists (a rowid, then deltas, each followed by a poslist: its size × 2
/// plus a delete flag, then each column's positions, a new column announced by 0x01 and its
/// number), a doclist running on over the pages that follow; `%_idx` gives the leaf on which a
/// term starts. Anything else (a structure of another version, an incremental merge under way,
/// a malformed leaf) makes `read` return nil, and the caller asks FTS5 instead.
struct FullTextPostings {
    /// One segment's id and its leaves.
    struct Segment {
        let id: Int64
        let first: Int64
        let last: Int64
    }

    /// The segments, newest first (level 0's newest first, then level 1's, …): for a row in
    /// several, the newest holds its current entry.
    let segments: [Segment]
    /// The averages record: the rows FTS5 counts and their tokens in all columns.
    let rows: Int64
    let tokens: Int64
    /// A term's first leaf in a segment (`%_idx`), and a segment's leaves from one on: prepared
    /// once for all the words of a query.
    private let firstLeaf: Statement
    private let leaves: Statement

    /// The index's structure, or nil when it is not one this reader knows.
    static func read(_ db: Database) throws(IndexError) -> FullTextPostings? {
        let statement = try db.prepare("SELECT block FROM chunks_fts_data WHERE id = ?1")
        func record(_ id: Int64) throws(IndexError) -> [UInt8]? {
            statement.reset()
            try statement.bind(id, at: 1)
            return try statement.step() ? statement.blob(at: 0) : nil
        }
        guard let structure = try record(10), let averages = try record(1) else { return nil }
        var reader = Bytes(structure)
        // A 4-byte cookie, then (legacy format) the level count, where a V2 record has 0xFF.
        guard structure.count > 4, structure[4] != 0xFF else { return nil }
        reader.offset = 4
        guard let levels = reader.varint(), levels >= 0, reader.varint() != nil, reader.varint() != nil else { return nil }
        var byLevel: [[Segment]] = []
        for _ in 0..<levels {
            guard let merging = reader.varint(), merging == 0, let count = reader.varint(), count >= 0 else { return nil }
            var level: [Segment] = []
            for _ in 0..<count {
                guard let id = reader.varint(), let first = reader.varint(), let last = reader.varint() else { return nil }
                level.append(Segment(id: id, first: first, last: last))
            }
            byLevel.append(level)
        }
        var totals = Bytes(averages)
        guard let rows = totals.varint() else { return nil }
        var tokens: Int64 = 0
        while totals.offset < averages.count {
            guard let column = totals.varint(), column >= 0,
                  case let (sum, overflow) = tokens.addingReportingOverflow(column), !overflow else { return nil }
            tokens = sum
        }
        return FullTextPostings(
            segments: byLevel.flatMap { $0.reversed() }, rows: rows, tokens: tokens,
            firstLeaf: try db.prepare("SELECT pgno FROM chunks_fts_idx WHERE segid = ?1 AND term <= ?2 ORDER BY term DESC LIMIT 1"),
            leaves: try db.prepare("SELECT block FROM chunks_fts_data WHERE id BETWEEN ?1 AND ?2 ORDER BY id"))
    }

    /// A row's hits of one term: in the title, in the content, in any other column.
    struct Hits {
        var title: Int32 = 0
        var content: Int32 = 0
        var other: Int32 = 0
        var isEmpty: Bool { title == 0 && content == 0 && other == 0 }
    }

    /// Calls `body` with every row holding `term` (the tokenizer's bytes) and its hits, in no
    /// particular order across segments. Returns false when a leaf is not as expected.
    func forEachRow(holding term: [UInt8], _ body: (Int64, Hits) -> Void) throws(IndexError) -> Bool {
        let key = [UInt8(ascii: "0")] + term
        guard let oldest = segments.last else { return true }
        // The newer segments' entries decide their rows (a row rewritten or deleted since the
        // oldest segment was written has an entry there, with the delete flag); the oldest
        // segment, at a million rows nearly all of them, is then read straight through.
        var newer: [Int64: Hits] = [:]
        for segment in segments.dropLast() {
            var entries: [(Int64, Hits)] = []
            guard try forEachEntry(of: key, in: segment, { rowid, hits in entries.append((rowid, hits)) }) else { return false }
            for (rowid, hits) in entries where newer[rowid] == nil { newer[rowid] = hits }
        }
        // The oldest segment's rowids ascend: a walk along the decided ones skips theirs.
        let decided = newer.sorted { $0.key < $1.key }
        var next = 0
        let complete = try forEachEntry(of: key, in: oldest) { rowid, hits in
            while next < decided.count, decided[next].key < rowid { next += 1 }
            if next < decided.count, decided[next].key == rowid { return }
            if !hits.isEmpty { body(rowid, hits) }
        }
        guard complete else { return false }
        for (rowid, hits) in decided where !hits.isEmpty { body(rowid, hits) }
        return true
    }
}

/// SQLite's varints over a byte array (`DocumentLengths.varint`'s format).
private struct Bytes {
    let bytes: [UInt8]
    var offset = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    mutating func varint() -> Int64? {
        let value = bytes.withUnsafeBytes { DocumentLengths.varint($0, at: offset) }
        guard let (result, next) = value else { return nil }
        offset = next
        return result
    }
}

extension FullTextPostings {
    static func recordID(segment: Int64, page: Int64) -> Int64 { segment << 37 | page }

    /// Calls `body` with each entry of `key`'s doclist in `segment`, reading its leaves in order
    /// from the one on which the term starts (its rowid and hits; a deleted row's hits are
    /// empty). False when a leaf is malformed; true when the term is absent.
    private func forEachEntry(of key: [UInt8], in segment: Segment,
                              _ body: (Int64, Hits) -> Void) throws(IndexError) -> Bool {
        firstLeaf.reset()
        try firstLeaf.bind(segment.id, at: 1)
        try firstLeaf.bind(key, at: 2)
        let page = max(try firstLeaf.step() ? firstLeaf.int64(at: 0) >> 1 : segment.first, segment.first)
        leaves.reset()
        try leaves.bind(Self.recordID(segment: segment.id, page: page), at: 1)
        try leaves.bind(Self.recordID(segment: segment.id, page: segment.last), at: 2)
        var decoder = DoclistDecoder()
        var first = true
        while try leaves.step() {
            let more = try leaves.withBlob(at: 0) { (leaf) throws(IndexError) -> Bool? in
                first ? decoder.start(key, on: leaf, body) : decoder.resume(on: leaf, body)
            }
            first = false
            guard let more else { return false }
            if !more { return true }
        }
        return true
    }
}

/// A doclist read across leaves: where the current entry stands when a leaf ends.
struct DoclistDecoder {
    var rowid: Int64 = 0
    /// Bytes of the current poslist still to come on the next leaf, and the hits so far.
    var pending = 0
    var partial: [UInt8] = []

    /// The leaf's header: the offset of its first rowid (0 when none comes before its first
    /// term) and of its footer (the term offsets).
    private static func header(_ leaf: UnsafeRawBufferPointer) -> (rowid: Int, footer: Int)? {
        guard leaf.count >= 4 else { return nil }
        let rowid = Int(leaf[0]) << 8 | Int(leaf[1]), footer = Int(leaf[2]) << 8 | Int(leaf[3])
        guard footer <= leaf.count, rowid < footer else { return nil }
        return (rowid, footer)
    }

    /// Finds `key` among the terms starting on `leaf` and reads its doclist on it. Nil when the
    /// leaf is malformed; false when the doclist ended on this leaf (or the term is absent);
    /// true when it runs on to the next leaf.
    mutating func start(_ key: [UInt8], on leaf: UnsafeRawBufferPointer,
                        _ body: (Int64, FullTextPostings.Hits) -> Void) -> Bool? {
        guard let (_, footer) = Self.header(leaf) else { return nil }
        var offsets: [Int] = []
        var at = footer, offset = 0
        while at < leaf.count {
            // Each term starts after the one before and before the footer: a damaged offset
            // must not make a doclist's end lie past the leaf's bytes.
            guard let (delta, next) = DocumentLengths.size(leaf, at: at), offsets.isEmpty || delta > 0,
                  offset + delta < footer else { return nil }
            offset += delta
            offsets.append(offset)
            at = next
        }
        var term: [UInt8] = []
        for (index, start) in offsets.enumerated() {
            guard start < footer else { return nil }
            var at = start
            var keep = 0
            if index > 0 {
                guard let (shared, next) = DocumentLengths.size(leaf, at: at) else { return nil }
                keep = shared
                at = next
            }
            guard let (added, next) = DocumentLengths.size(leaf, at: at), keep <= term.count,
                  next + added <= footer else { return nil }
            term = Array(term.prefix(keep)) + leaf[next..<(next + added)]
            at = next + added
            if term.lexicographicallyPrecedes(key) { continue }
            guard term == key else { return false }
            let end = index + 1 < offsets.count ? offsets[index + 1] : footer
            guard let (first, after) = DocumentLengths.varint(leaf, at: at), after <= end else { return nil }
            rowid = first
            guard entries(leaf, from: after, to: end, body) != nil else { return nil }
            // The last term's doclist may run on: the next leaf then starts with its rest.
            return index + 1 == offsets.count
        }
        return false
    }

    /// Reads the doclist on a leaf after the one it started on. Nil when malformed; false when
    /// it ended here; true when it runs on.
    mutating func resume(on leaf: UnsafeRawBufferPointer, _ body: (Int64, FullTextPostings.Hits) -> Void) -> Bool? {
        guard let (rowidOffset, footer) = Self.header(leaf) else { return nil }
        var end = footer
        if footer < leaf.count {
            guard let (firstTerm, _) = DocumentLengths.size(leaf, at: footer), firstTerm <= footer else { return nil }
            end = firstTerm
        }
        let hasTerms = footer < leaf.count
        let continued = rowidOffset > 0 ? rowidOffset : end
        guard continued >= 4 else { return nil }
        if pending > 0 {
            let take = min(pending, continued - 4)
            partial += leaf[4..<(4 + take)]
            pending -= take
            if pending == 0 {
                guard let hits = partial.withUnsafeBytes({ Self.hits($0, from: 0, to: $0.count) }) else { return nil }
                partial = []
                body(rowid, hits)
            }
        }
        if rowidOffset > 0 {
            guard pending == 0, let (literal, after) = DocumentLengths.varint(leaf, at: rowidOffset) else { return nil }
            rowid = literal
            guard entries(leaf, from: after, to: end, body) != nil else { return nil }
        }
        return !hasTerms
    }

    /// The entries from `start` (a poslist's size, the current rowid's) to `end`. Nil when
    /// malformed; false when a poslist is cut at `end` (its rest starts the next leaf).
    private mutating func entries(_ leaf: UnsafeRawBufferPointer, from start: Int, to end: Int,
                                  _ body: (Int64, FullTextPostings.Hits) -> Void) -> Bool? {
        var at = start
        while true {
            guard let (size, next) = DocumentLengths.size(leaf, at: at), next <= end else { return nil }
            // The low bit is the delete flag: a deleted row's entry has no positions, a
            // rewritten row's its new ones; either way the newest entry is the row's.
            let bytes = size >> 1
            if next + bytes > end {
                partial = Array(leaf[next..<end])
                pending = bytes - (end - next)
                return false
            }
            guard let hits = Self.hits(leaf, from: next, to: next + bytes) else { return nil }
            body(rowid, hits)
            at = next + bytes
            if at == end { return true }
            guard let (delta, after) = DocumentLengths.varint(leaf, at: at), delta > 0, after <= end,
                  case let (sum, overflow) = rowid.addingReportingOverflow(delta), !overflow else { return nil }
            rowid = sum
            at = after
        }
    }

    /// The hits of a poslist's bytes: each varint is a position (2 or more), or 1 announcing
    /// the column whose number follows.
    static func hits(_ bytes: UnsafeRawBufferPointer, from start: Int, to end: Int) -> FullTextPostings.Hits? {
        var hits = FullTextPostings.Hits()
        var column: Int64 = 0
        var at = start
        while at < end {
            // A one-byte varint is most positions' (an offset delta + 2 below 128).
            let byte = bytes[at]
            if byte >= 2, byte < 0x80 {
                at += 1
            } else if byte == 1 {
                guard let (number, next) = DocumentLengths.varint(bytes, at: at + 1), next <= end else { return nil }
                column = number
                at = next
                continue
            } else {
                guard let (_, next) = DocumentLengths.varint(bytes, at: at), next <= end else { return nil }
                at = next
            }
            switch column {
            case 0: hits.title += 1
            case 1: hits.content += 1
            default: hits.other += 1
            }
        }
        return hits
    }
}

extension FullTextPostings {
    /// The term FTS5 searches for each of `words` (a query's phrases, `LexicalQuery`): the
    /// table's own tokenizer run on the word as on a query's phrase. Nil for a word that is not
    /// exactly one token (a phrase of several must match positions, which this reader does not
    /// do), and nil altogether when the tokenizer cannot be had.
    static func terms(for words: [String], db: Database) throws(IndexError) -> [[UInt8]?]? {
        let statement = try db.prepare("SELECT sql FROM sqlite_schema WHERE name = 'chunks_fts'")
        guard try statement.step(), let sql = statement.string(at: 0),
              let arguments = tokenizerArguments(sql), let name = arguments.first else { return nil }
        let api = try BM25Function.fts5API(of: db)
        var context: UnsafeMutableRawPointer?
        var methods = fts5_tokenizer()
        guard api.pointee.xFindTokenizer(api, name, &context, &methods) == SQLITE_OK,
              let create = methods.xCreate, let delete = methods.xDelete, let tokenize = methods.xTokenize else { return nil }
        let rest = arguments.dropFirst().map { strdup($0) }
        defer { rest.forEach { free($0) } }
        var tokenizer: OpaquePointer?
        let created = rest.map { UnsafePointer($0) }.withUnsafeBufferPointer { argv in
            create(context, UnsafeMutablePointer(mutating: argv.baseAddress), Int32(argv.count), &tokenizer)
        }
        guard created == SQLITE_OK, let tokenizer else { return nil }
        defer { delete(tokenizer) }
        var terms: [[UInt8]?] = []
        for word in words {
            var tokens: [[UInt8]] = []
            let rc = withUnsafeMutablePointer(to: &tokens) { sink in
                word.utf8CString.withUnsafeBufferPointer { text in
                    tokenize(tokenizer, sink, FTS5_TOKENIZE_QUERY, text.baseAddress, Int32(text.count - 1), collectToken)
                }
            }
            guard rc == SQLITE_OK else { return nil }
            terms.append(tokens.count == 1 ? tokens[0] : nil)
        }
        return terms
    }

    /// The words of `tokenize = '…'` in a `CREATE VIRTUAL TABLE … USING fts5(…)` statement.
    static func tokenizerArguments(_ sql: String) -> [String]? {
        guard let option = sql.range(of: "tokenize"), let open = sql[option.upperBound...].firstIndex(of: "'"),
              let close = sql[sql.index(after: open)...].firstIndex(of: "'") else { return nil }
        let words = sql[sql.index(after: open)..<close].split(separator: " ").map(String.init)
        return words.isEmpty ? nil : words
    }
}

/// The tokenizer's callback: appends each token's bytes to the array `context` points to.
private let collectToken: @convention(c) (UnsafeMutableRawPointer?, Int32, UnsafePointer<CChar>?, Int32, Int32, Int32) -> Int32 = {
    context, _, token, count, _, _ in
    guard let context, let token else { return SQLITE_OK }
    let bytes = UnsafeRawBufferPointer(start: token, count: Int(count))
    context.assumingMemoryBound(to: [[UInt8]].self).pointee.append(Array(bytes))
    return SQLITE_OK
}
