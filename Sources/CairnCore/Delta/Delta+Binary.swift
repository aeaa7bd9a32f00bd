extension Delta {
    /// The 8-byte magic that starts a delta of format 1 (no set hash).
    public static let magic = Array("CAIRNDL1".utf8)
    /// The magic of format 2, whose header also holds the target's set hash.
    public static let magicWithSetHash = Array("CAIRNDL2".utf8)

    /// The canonical binary encoding (uncompressed; protocol/delta.md): format 2 when the delta
    /// has a set hash, else format 1.
    public var encoded: [UInt8] {
        var bytes = Self.encodedHeader(fromVersion: fromVersion, toVersion: toVersion, fromStateRoot: fromStateRoot,
                                       toStateRoot: toStateRoot, toSetHash: toSetHash, dimension: dimension,
                                       upserts: upserts.count, deletes: deletes.count)
        for record in upserts { bytes += Self.encodedUpsert(record) }
        for id in deletes { bytes += Self.encodedDelete(id) }
        return bytes
    }

    /// The encoding's pieces, for a writer that streams a large delta: the header, then each
    /// upsert in ascending id order, then each delete in ascending id order. The caller keeps
    /// the invariants `init` checks (versions, ids ascending, finite vectors of `dimension`).
    public static func encodedHeader(fromVersion: Int, toVersion: Int, fromStateRoot: ContentID, toStateRoot: ContentID,
                                     toSetHash: ContentID?, dimension: Int, upserts: Int, deletes: Int) -> [UInt8] {
        var w = ByteWriter()
        w.bytes.append(contentsOf: toSetHash == nil ? Self.magic : Self.magicWithSetHash)
        w.u64(UInt64(fromVersion))
        w.u64(UInt64(toVersion))
        w.bytes.append(contentsOf: fromStateRoot.bytes)
        w.bytes.append(contentsOf: toStateRoot.bytes)
        if let toSetHash { w.bytes.append(contentsOf: toSetHash.bytes) }
        w.u32(UInt32(dimension))
        w.u32(UInt32(upserts))
        w.u32(UInt32(deletes))
        return w.bytes
    }

    /// One upsert: id, title, content, scenario, tags, source, then the vector.
    public static func encodedUpsert(_ record: ChunkRecord) -> [UInt8] {
        var w = ByteWriter()
        let chunk = record.chunk
        w.string(chunk.id)
        w.string(chunk.title)
        w.string(chunk.content)
        w.optionalString(chunk.scenario)
        w.u32(UInt32(chunk.tags.count))
        for tag in chunk.tags { w.string(tag) }
        w.optionalString(chunk.source)
        VectorBytes.withBytes(of: record.vector) { w.bytes.append(contentsOf: $0) }
        return w.bytes
    }

    /// One delete: the id.
    public static func encodedDelete(_ id: String) -> [UInt8] {
        var w = ByteWriter()
        w.string(id)
        return w.bytes
    }

    /// Decodes a delta (uncompressed), refusing anything `encoded` would not produce.
    ///
    /// Never traps and never allocates more than the input justifies: every count and length is
    /// checked against the bytes left before anything is reserved.
    /// - Throws: `CoreError` with code `.deltaMalformed`, naming the byte offset.
    public static func decode(_ bytes: [UInt8]) throws(CoreError) -> Delta {
        var upserts: [ChunkRecord] = []
        let layout = try bytes.withUnsafeBytes { raw in
            Result { () throws(CoreError) in try Layout(of: raw) { upserts.append($0) } }
        }.get()
        return Delta(fromVersion: layout.fromVersion, toVersion: layout.toVersion, fromStateRoot: layout.fromStateRoot,
                     toStateRoot: layout.toStateRoot, toSetHash: layout.toSetHash, dimension: layout.dimension,
                     checkedUpserts: upserts, deletes: layout.deletes)
    }

    /// A delta's encoding read through and checked against every rule of `decode`: its header,
    /// where each upsert starts and its id, and the deletes.
    struct Layout {
        let fromVersion: Int
        let toVersion: Int
        let fromStateRoot: ContentID
        let toStateRoot: ContentID
        let toSetHash: ContentID?
        let dimension: Int
        let upsertOffsets: [Int]
        let upsertIDs: [String]
        let deletes: [String]

        /// Reads `bytes` through; each upsert is decoded once, checked and handed to `upsert`.
        init(of bytes: UnsafeRawBufferPointer, upsert: (ChunkRecord) -> Void = { _ in }) throws(CoreError) {
            var r = ByteReader(bytes)
            let magic = try r.take(8, "magic")
            let withSetHash = magic.elementsEqual(magicWithSetHash)
            guard withSetHash || magic.elementsEqual(Delta.magic) else {
                throw CoreError(.deltaMalformed, "not a Cairn delta of format 1 or 2 (bad magic)")
            }
            let fromVersion = try r.u64("from_version"), toVersion = try r.u64("to_version")
            fromStateRoot = ContentID(bytes: Array(try r.take(32, "from_state_root")))!
            toStateRoot = ContentID(bytes: Array(try r.take(32, "to_state_root")))!
            toSetHash = withSetHash ? ContentID(bytes: Array(try r.take(32, "to_set_hash")))! : nil
            let dimension = Int(try r.u32("dimension"))
            let upsertCount = Int(try r.u32("upsert_count")), deleteCount = Int(try r.u32("delete_count"))
            guard fromVersion <= UInt64(maxVersion), toVersion <= UInt64(maxVersion) else { throw r.failure("version above 2^53") }
            guard (1...maxDimension).contains(dimension) else { throw r.failure("dimension outside 1...\(maxDimension)") }
            // The smallest upsert: three empty strings, two flags, a tag count, the vector.
            let minUpsert = 4 * 3 + 2 + 4 + 4 * dimension
            guard upsertCount * minUpsert + deleteCount * 4 <= r.remaining else {
                throw r.failure("declared counts need more bytes than remain")
            }
            var offsets: [Int] = [], ids: [String] = []
            offsets.reserveCapacity(upsertCount)
            ids.reserveCapacity(upsertCount)
            for index in 0..<upsertCount {
                offsets.append(r.offset)
                let record = try readUpsert(&r, dimension: dimension)
                try check(vector: record.vector, of: index, dimension: dimension, code: .deltaMalformed)
                ids.append(record.chunk.id)
                upsert(record)
            }
            var deletes: [String] = []
            deletes.reserveCapacity(deleteCount)
            for _ in 0..<deleteCount { deletes.append(try r.string("delete id")) }
            guard r.remaining == 0 else { throw r.failure("\(r.remaining) trailing byte(s)") }
            try check(.deltaMalformed, fromVersion: Int(fromVersion), toVersion: Int(toVersion), dimension: dimension,
                      upsertIDs: ids, deletes: deletes)
            (self.fromVersion, self.toVersion, self.dimension) = (Int(fromVersion), Int(toVersion), dimension)
            (upsertOffsets, upsertIDs, self.deletes) = (offsets, ids, deletes)
        }
    }

    /// The upsert at `offset` of an encoding that `Layout` read through: it decodes as it did then.
    static func upsert(in bytes: UnsafeRawBufferPointer, at offset: Int, dimension: Int) -> ChunkRecord {
        var r = ByteReader(bytes, at: offset)
        guard let record = try? readUpsert(&r, dimension: dimension) else {
            preconditionFailure("an upsert of a checked delta no longer decodes at byte offset \(offset)")
        }
        return record
    }

    private static func readUpsert(_ r: inout ByteReader, dimension: Int) throws(CoreError) -> ChunkRecord {
        let id = try r.string("id"), title = try r.string("title"), content = try r.string("content")
        let scenario = try r.optionalString("scenario")
        let tagCount = Int(try r.u32("tag count"))
        guard tagCount * 4 <= r.remaining else { throw r.failure("tag count needs more bytes than remain") }
        var tags: [String] = []
        tags.reserveCapacity(tagCount)
        for _ in 0..<tagCount { tags.append(try r.string("tag")) }
        let source = try r.optionalString("source")
        var vector: [Float] = []
        vector.reserveCapacity(dimension)
        VectorBytes.decode(try r.take(4 * dimension, "vector"), into: &vector)
        return ChunkRecord(chunk: Chunk(id: id, title: title, content: content, scenario: scenario, tags: tags, source: source),
                           vector: vector)
    }
}
