import Synchronization

/// How many rows of one (immutable) index contain each search token, remembered across
/// queries: BM25's IDF needs it for every phrase of every query, and counting a frequent
/// token walks its whole doclist. A bounded map, emptied when full: at most `capacity` tokens
/// and `byteCapacity` bytes of them (a query's token may be 4 KB long, and every query may
/// bring new ones, over the network with cairn-server's online search).
final class DocumentCounts: Sendable {
    static let capacity = 50_000
    static let byteCapacity = 4 << 20
    private let known = Mutex<(counts: [String: Int64], bytes: Int)>(([:], 0))

    /// The tokens remembered and their bytes (tests).
    var held: (tokens: Int, bytes: Int) { known.withLock { ($0.counts.count, $0.bytes) } }

    /// The count of every token, in order, counting on `db` those not yet known.
    func counts(of tokens: [String], db: Database) throws(IndexError) -> [Int64] {
        var counts = known.withLock { known in tokens.map { known.counts[$0] } }
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
            let bytes = found.keys.reduce(0) { $0 + $1.utf8.count }
            known.withLock { known in
                if known.counts.count + found.count > Self.capacity || known.bytes + bytes > Self.byteCapacity {
                    known = ([:], 0)
                }
                known.counts.merge(found) { $1 }
                known.bytes += bytes  // a token another query added meanwhile counts twice: an overestimate
            }
        }
        return counts.map { $0 ?? 0 }
    }
}
