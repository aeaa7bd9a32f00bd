import Synchronization

/// How many rows of one (immutable) index contain each search token, remembered across
/// queries: BM25's IDF needs it for every phrase of every query, and counting a frequent
/// token walks its whole doclist. A bounded map, emptied when full.
final class DocumentCounts: Sendable {
    static let capacity = 50_000
    private let known = Mutex<[String: Int64]>([:])

    /// The count of every token, in order, counting on `db` those not yet known.
    func counts(of tokens: [String], db: Database) throws(IndexError) -> [Int64] {
        var counts = known.withLock { known in tokens.map { known[$0] } }
        var found: [String: Int64] = [:]
        guard counts.contains(where: { $0 == nil }) else { return counts.map { $0 ?? 0 } }
        let statement = try db.prepare("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?1")
        for (index, token) in tokens.enumerated() where counts[index] == nil {
            statement.reset()
            try statement.bind(LexicalQuery.expression([token]), at: 1)
            _ = try statement.step()
            counts[index] = statement.int64(at: 0)
            found[token] = counts[index]
        }
        if !found.isEmpty {
            known.withLock { known in
                if known.count + found.count > Self.capacity { known.removeAll(keepingCapacity: true) }
                known.merge(found) { $1 }
            }
        }
        return counts.map { $0 ?? 0 }
    }
}
