import CSQLite
import Foundation

/// `cairn_bm25(chunks_fts, w_title, w_content [, counts [, k1, b]])`: FTS5's own `bm25()` — the
/// same formula, the same operations in the same order, so with k1 = 1.2 and b = 0.75 (FTS5's
/// fixed values, the defaults here) the same scores to the last bit — except that a row's length
/// in tokens comes from memory instead of a lookup in the `%_docsize` table, each phrase's
/// document count (for its IDF) may be given as `counts` (`encode`), which spares a walk of each
/// phrase's whole doclist per query, and k1 and b may be given (`RankingConfiguration`).
///
/// FTS5's `bm25()` asks `xColumnSize` for every matching row, a B-tree lookup that costs about
/// two thirds of a lexical query on a large index (measured on 100,000 chunks: 15 ms median with
/// `bm25()`, 10 ms of it with a bare join on `chunks_fts_docsize`, 2 ms for the matching rowids
/// alone). The lengths are read once when the index opens (`DocumentLengths`).
///
/// Two more uses for pruned lexical search (`SearchIndex`, docs/scale.md): a phrase whose count
/// is given as `ignoredPhrase` adds nothing to the score (a term repeated in the expression so
/// that FTS5 seeks it only in rows that hold another), and a `LexicalCollector` bound as the last
/// argument (`bindCollector`) is told each row's score parts of its `nonEssential` phrases.
enum BM25Function {
    static let name = "cairn_bm25"
    /// FTS5's `bm25()` constants, used when a call gives no k1 and b.
    static let fts5K1 = 1.2, fts5B = 0.75
    /// A phrase `counts` gives this count for is left out of the score.
    static let ignoredPhrase: Int64 = -1

    /// Binds `collector` as parameter `index` of `statement` (the function's sixth argument
    /// after the table: w_title, w_content, counts, k1, b, collector); the collector must
    /// outlive the statement's steps.
    static func bindCollector(_ collector: LexicalCollector, to statement: Statement, at index: Int32) throws(IndexError) {
        let rc = sqlite3_bind_pointer(statement.handle, index, Unmanaged.passUnretained(collector).toOpaque(), collectorPointerType, nil)
        guard rc == SQLITE_OK else { throw IndexError(.sqlite, "cannot bind the lexical collector", sqliteCode: rc) }
    }

    /// `counts` as the function's last argument: 8 bytes per phrase, little-endian.
    static func encode(_ counts: [Int64]) -> [UInt8] {
        counts.flatMap { count in (0..<8).map { UInt8(truncatingIfNeeded: count >> ($0 * 8)) } }
    }

    /// The counts in the argument at `index`, when it is a blob of `phrases` counts.
    fileprivate static func decode(_ values: UnsafeMutablePointer<OpaquePointer?>?, count: Int32, index: Int, phrases: Int) -> [Int64]? {
        guard let values, Int(count) > index, let value = values[index],
              sqlite3_value_type(value) == SQLITE_BLOB, Int(sqlite3_value_bytes(value)) == 8 * phrases,
              let bytes = sqlite3_value_blob(value) else { return nil }
        let raw = UnsafeRawBufferPointer(start: bytes, count: 8 * phrases)
        return (0..<phrases).map { phrase in
            (0..<8).reduce(Int64(0)) { $0 | Int64(raw[phrase * 8 + $1]) << ($1 * 8) }
        }
    }

    /// A phrase's IDF as FTS5's `bm25()` computes it: log((N - n + 0.5) / (n + 0.5)) for `hits`
    /// of `rows`, clamped to 1e-6 when not positive. Every scorer of Cairn's calls this, so that
    /// their scores stay the same doubles.
    @inline(__always)
    static func idf(rows: Double, hits: Double) -> Double {
        let value = log((rows - hits + 0.5) / (hits + 0.5))
        return value <= 0 ? 1e-6 : value
    }

    /// A phrase's part of a row's score before its IDF: f(k1 + 1) / (f + k1(1 - b + b d / avgdl))
    /// for the weighted `frequency` f in a row of `length` d tokens, in `bm25()`'s operations.
    @inline(__always)
    static func tfPart(frequency: Double, length: Double, averageLength: Double, k1: Double, b: Double) -> Double {
        (frequency * (k1 + 1.0)) / (frequency + k1 * (1 - b + b * length / averageLength))
    }

    /// Registers `cairn_bm25` on one connection; the connection keeps `lengths` alive.
    static func register(on db: Database, lengths: DocumentLengths) throws(IndexError) {
        let api = try fts5API(of: db)
        let context = Unmanaged.passRetained(lengths).toOpaque()
        let rc = api.pointee.xCreateFunction(api, name, context, score, release)
        guard rc == SQLITE_OK else {
            Unmanaged<DocumentLengths>.fromOpaque(context).release()
            throw IndexError(.sqlite, "cannot register \(name)", sqliteCode: rc)
        }
    }

    /// FTS5's interface on `db` (version 2 or later), valid while the connection is open.
    static func fts5API(of db: Database) throws(IndexError) -> UnsafeMutablePointer<fts5_api> {
        let statement = try db.prepare("SELECT fts5(?1)")
        var api: UnsafeMutablePointer<fts5_api>?
        let bound = withUnsafeMutablePointer(to: &api) { pointer in
            sqlite3_bind_pointer(statement.handle, 1, pointer, apiPointerType, nil)
        }
        guard bound == SQLITE_OK else { throw IndexError(.sqlite, "cannot ask SQLite for its FTS5 interface", sqliteCode: bound) }
        _ = try statement.step()
        guard let api, api.pointee.iVersion >= 2 else {
            throw IndexError(.sqlite, "this SQLite has no FTS5 interface of version 2 or later")
        }
        return api
    }
}

/// The type tag FTS5 checks on the pointer bound to `SELECT fts5(?1)`; it must outlive the bind.
nonisolated(unsafe) private let apiPointerType = strdup("fts5_api_ptr")!
/// The type tag of a bound `LexicalCollector`.
nonisolated(unsafe) private let collectorPointerType = strdup("cairn_lexical_collector")!

/// What one pruned lexical query learns of its non-essential phrases (those after
/// `firstNonEssential`) in the rows it scores: per phrase, the rows that hold it and the sum and
/// sum of squares of its score part before the IDF (the tf part, `f(k1 + 1) / (f + K)`). Used
/// on one thread, by the statement it is bound to.
final class LexicalCollector {
    let firstNonEssential: Int
    var rows: [Int]
    var sums: [Double]
    var squares: [Double]

    init(firstNonEssential: Int, phrases: Int) {
        self.firstNonEssential = firstNonEssential
        (rows, sums, squares) = ([Int](repeating: 0, count: phrases), [Double](repeating: 0, count: phrases),
                                 [Double](repeating: 0, count: phrases))
    }
}

private let release: @convention(c) (UnsafeMutableRawPointer?) -> Void = { context in
    guard let context else { return }
    Unmanaged<DocumentLengths>.fromOpaque(context).release()
}

private let freeStatistics: @convention(c) (UnsafeMutableRawPointer?) -> Void = { buffer in
    buffer?.assumingMemoryBound(to: Double.self).deallocate()
}

private let countRow: @convention(c) (UnsafePointer<Fts5ExtensionApi>?, OpaquePointer?, UnsafeMutableRawPointer?) -> Int32 = {
    _, _, hits in
    hits?.assumingMemoryBound(to: Int64.self).pointee += 1
    return SQLITE_OK
}

/// Computes, once per query, what FTS5's `fts5Bm25GetData` computes, into a buffer that FTS5
/// keeps with the cursor: the average row length, each phrase's IDF, then room for each phrase's
/// weighted frequency in the current row.
private func queryStatistics(_ api: Fts5ExtensionApi, _ fts: OpaquePointer, phrases: Int,
                             given counts: [Int64]?) -> (UnsafeMutablePointer<Double>?, Int32) {
    var rows: Int64 = 0, tokens: Int64 = 0
    var rc = api.xRowCount(fts, &rows)
    if rc == SQLITE_OK { rc = api.xColumnTotalSize(fts, -1, &tokens) }
    guard rc == SQLITE_OK else { return (nil, rc) }
    let buffer = UnsafeMutablePointer<Double>.allocate(capacity: 1 + 2 * phrases)
    buffer.initialize(repeating: 0, count: 1 + 2 * phrases)
    buffer[0] = Double(tokens) / Double(rows)
    for phrase in 0..<phrases {
        var hits: Int64 = 0
        if let counts {
            hits = counts[phrase]
            // Left out of the score: an IDF of exactly 0 (a computed one is at least 1e-6).
            if hits == BM25Function.ignoredPhrase { continue }
        } else {
            rc = api.xQueryPhrase(fts, Int32(phrase), &hits, countRow)
            guard rc == SQLITE_OK else { buffer.deallocate(); return (nil, rc) }
        }
        buffer[1 + phrase] = BM25Function.idf(rows: Double(rows), hits: Double(hits))
    }
    rc = api.xSetAuxdata(fts, buffer, freeStatistics)
    return rc == SQLITE_OK ? (buffer, rc) : (nil, rc)
}

private let score: fts5_extension_function = { api, fts, context, count, values in
    guard let api, let fts else { return }
    let k1 = count > 3 ? sqlite3_value_double(values![3]) : BM25Function.fts5K1
    let b = count > 4 ? sqlite3_value_double(values![4]) : BM25Function.fts5B
    let functions = api.pointee
    let phrases = Int(functions.xPhraseCount(fts))
    var statistics = functions.xGetAuxdata(fts, 0)?.assumingMemoryBound(to: Double.self)
    if statistics == nil {
        let (computed, rc) = queryStatistics(functions, fts, phrases: phrases,
                                                 given: BM25Function.decode(values, count: count, index: 2, phrases: phrases))
        guard let computed else { sqlite3_result_error_code(context, rc); return }
        statistics = computed
    }
    guard let statistics else { return }
    let frequency = statistics + 1 + phrases
    frequency.update(repeating: 0, count: phrases)

    // Each phrase's hits in this row, phrase by phrase (`xInst` would first merge every
    // phrase's hits into one list sorted by position, which costs more than the scoring): the
    // same weights added in the same order within each phrase, so the same sums to the bit.
    // (Two values, not an array: this runs for every matching row.)
    let titleWeight = count > 0 ? sqlite3_value_double(values![0]) : 1.0
    let contentWeight = count > 1 ? sqlite3_value_double(values![1]) : 1.0
    var rc = SQLITE_OK
    for phrase in 0..<phrases where statistics[1 + phrase] != 0 {
        var iterator = Fts5PhraseIter()
        var column: Int32 = 0, offset: Int32 = 0
        rc = functions.xPhraseFirst(fts, Int32(phrase), &iterator, &column, &offset)
        guard rc == SQLITE_OK else { break }
        while column >= 0 {
            frequency[phrase] += column == 0 ? titleWeight : column == 1 ? contentWeight : 1.0
            functions.xPhraseNext(fts, &iterator, &column, &offset)
        }
    }
    guard rc == SQLITE_OK else { sqlite3_result_error_code(context, rc); return }

    let rowid = functions.xRowid(fts)
    var length = Unmanaged<DocumentLengths>.fromOpaque(functions.xUserData(fts)!)
        ._withUnsafeGuaranteedRef { $0.tokens(rowid: rowid) }
    if length == nil {
        var tokens: Int32 = 0
        rc = functions.xColumnSize(fts, -1, &tokens)
        guard rc == SQLITE_OK else { sqlite3_result_error_code(context, rc); return }
        length = tokens
    }
    let d = Double(length!)
    let averageLength = statistics[0]
    var total = 0.0
    for phrase in 0..<phrases {
        total += statistics[1 + phrase] * BM25Function.tfPart(frequency: frequency[phrase], length: d, averageLength: averageLength, k1: k1, b: b)
    }
    if count > 5, let pointer = sqlite3_value_pointer(values![5], collectorPointerType) {
        let collector = Unmanaged<LexicalCollector>.fromOpaque(pointer).takeUnretainedValue()
        let end = min(phrases, collector.firstNonEssential + collector.rows.count)
        for phrase in min(collector.firstNonEssential, end)..<end where frequency[phrase] > 0 {
            let part = BM25Function.tfPart(frequency: frequency[phrase], length: d, averageLength: averageLength, k1: k1, b: b)
            let index = phrase - collector.firstNonEssential
            collector.rows[index] += 1
            collector.sums[index] += part
            collector.squares[index] += part * part
        }
    }
    sqlite3_result_double(context, -1.0 * total)
}
