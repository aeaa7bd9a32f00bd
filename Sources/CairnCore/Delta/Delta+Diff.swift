extension Delta {
    /// The smallest delta from `old` to `new`: a chunk is upserted when it is new or its
    /// content, metadata or vector changed (byte for byte), and deleted when it is gone.
    /// Of format 2 (with `new`'s set hash) unless `withSetHash` is false.
    /// - Throws: `.invalidArgument` if ids repeat within `old` or `new`, or on any `Delta.init`
    ///   precondition.
    public static func between(old: [ChunkRecord], new: [ChunkRecord], fromVersion: Int, toVersion: Int,
                               dimension: Int, withSetHash: Bool = true) throws(CoreError) -> Delta {
        let oldByID = try index(old, "old"), newByID = try index(new, "new")
        let upserts = new.filter { record in
            oldByID[Array(record.chunk.id.utf8)].map { $0.stateRecord != record.stateRecord } ?? true
        }
        let deletes = old.map(\.chunk.id).filter { newByID[Array($0.utf8)] == nil }
        // Each record's hashes once (its embedding hash reads the whole vector), for both hashes.
        let target = new.map(\.stateRecord)
        return try Delta(fromVersion: fromVersion, toVersion: toVersion, fromStateRoot: StateRoot.compute(chunks: old),
                         toStateRoot: StateRoot.compute(target),
                         toSetHash: withSetHash ? SetHash(leaves: target.map(\.leaf)).digest(count: target.count) : nil,
                         dimension: dimension, upserts: upserts, deletes: deletes)
    }

    /// Applies the delta to the records of version `fromVersion`, returning those of
    /// `toVersion` sorted by id. Checks both state roots, and the set hash when it has one.
    /// - Throws: `.stateRootMismatch` if `records` are not the delta's base or the result is
    ///   not its target; `.deltaMalformed` if it deletes an id that is absent; `.invalidArgument`
    ///   if ids repeat in `records`.
    public func apply(to records: [ChunkRecord]) throws(CoreError) -> [ChunkRecord] {
        guard StateRoot.compute(chunks: records) == fromStateRoot else {
            throw CoreError(.stateRootMismatch, "the records are not version \(fromVersion) (state root differs); fetch a full snapshot")
        }
        var byID = try Self.index(records, "records")
        for id in deletes {
            guard byID.removeValue(forKey: Array(id.utf8)) != nil else {
                throw CoreError(.deltaMalformed, "the delta deletes a chunk that version \(fromVersion) does not have")
            }
        }
        for record in upserts { byID[Array(record.chunk.id.utf8)] = record }
        let result = byID.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map(\.value)
        // In id order already; each leaf once (its embedding hash reads the whole vector).
        let leaves = result.map(\.stateRecord.leaf)
        guard StateRoot.compute(orderedLeaves: leaves) == toStateRoot else {
            throw CoreError(.stateRootMismatch, "applying the delta did not produce version \(toVersion)'s state root")
        }
        if let toSetHash, SetHash(leaves: leaves).digest(count: leaves.count) != toSetHash {
            throw CoreError(.stateRootMismatch, "applying the delta did not produce version \(toVersion)'s set hash")
        }
        return result
    }

    /// Records keyed by the UTF-8 bytes of their ids (byte-exact, unlike `String` equality).
    private static func index(_ records: [ChunkRecord], _ what: String) throws(CoreError) -> [[UInt8]: ChunkRecord] {
        var byID: [[UInt8]: ChunkRecord] = [:]
        for record in records {
            guard byID.updateValue(record, forKey: Array(record.chunk.id.utf8)) == nil else {
                throw CoreError(.invalidArgument, "\(what) contain a repeated chunk id")
            }
        }
        return byID
    }
}
