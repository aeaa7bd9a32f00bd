/// The chunk upserts and deletes that turn version `fromVersion` into `toVersion`
/// (protocol/delta.md). Upserts and deletes are kept sorted by the UTF-8 bytes of their ids,
/// which makes the binary encoding canonical.
public struct Delta: Sendable, Equatable {
    /// The largest embedding dimension a delta or manifest may declare.
    public static let maxDimension = 16_384
    /// The largest version number (2^53, like every integer in a manifest).
    public static let maxVersion = 1 << 53

    public let fromVersion: Int
    public let toVersion: Int
    public let fromStateRoot: ContentID
    public let toStateRoot: ContentID
    /// The target version's set hash (`SetHash.digest`), which a device checks in time
    /// proportional to the delta; nil in a delta of format 1 (protocol/delta.md).
    public let toSetHash: ContentID?
    public let dimension: Int
    /// Chunks added or changed, ascending by id.
    public let upserts: [ChunkRecord]
    /// Ids of chunks removed, ascending.
    public let deletes: [String]

    /// A delta; sorts `upserts` and `deletes` by id.
    /// - Throws: `.invalidArgument` unless 1 ≤ fromVersion < toVersion ≤ 2^53, 1 ≤ dimension ≤
    ///   16384, every vector has `dimension` finite values, ids are non-empty and unique, and no
    ///   id is both upserted and deleted.
    public init(fromVersion: Int, toVersion: Int, fromStateRoot: ContentID, toStateRoot: ContentID,
                toSetHash: ContentID? = nil, dimension: Int, upserts: [ChunkRecord], deletes: [String]) throws(CoreError) {
        try self.init(validating: .invalidArgument, fromVersion: fromVersion, toVersion: toVersion,
                      fromStateRoot: fromStateRoot, toStateRoot: toStateRoot, toSetHash: toSetHash, dimension: dimension,
                      upserts: upserts.sorted { String.utf8Precedes($0.chunk.id, $1.chunk.id) },
                      deletes: deletes.sorted(by: String.utf8Precedes))
    }

    /// Checks every invariant of the type, reporting failures with `code`. Lists must be sorted.
    init(validating code: CoreError.Code, fromVersion: Int, toVersion: Int, fromStateRoot: ContentID,
         toStateRoot: ContentID, toSetHash: ContentID?, dimension: Int, upserts: [ChunkRecord], deletes: [String]) throws(CoreError) {
        for (index, record) in upserts.enumerated() {
            try Self.check(vector: record.vector, of: index, dimension: dimension, code: code)
        }
        try Self.check(code, fromVersion: fromVersion, toVersion: toVersion, dimension: dimension,
                       upsertIDs: upserts.map(\.chunk.id), deletes: deletes)
        self.init(fromVersion: fromVersion, toVersion: toVersion, fromStateRoot: fromStateRoot, toStateRoot: toStateRoot,
                  toSetHash: toSetHash, dimension: dimension, checkedUpserts: upserts, deletes: deletes)
    }

    /// A delta whose invariants were checked (`check`).
    init(fromVersion: Int, toVersion: Int, fromStateRoot: ContentID, toStateRoot: ContentID, toSetHash: ContentID?,
         dimension: Int, checkedUpserts upserts: [ChunkRecord], deletes: [String]) {
        self.fromVersion = fromVersion
        self.toVersion = toVersion
        self.fromStateRoot = fromStateRoot
        self.toStateRoot = toStateRoot
        self.toSetHash = toSetHash
        self.dimension = dimension
        self.upserts = upserts
        self.deletes = deletes
    }

    /// The invariants of a delta but its vectors' (`check(vector:)`): versions, dimension, ids
    /// non-empty and ascending, none both upserted and deleted.
    static func check(_ code: CoreError.Code, fromVersion: Int, toVersion: Int, dimension: Int,
                      upsertIDs: [String], deletes: [String]) throws(CoreError) {
        guard 1 <= fromVersion, fromVersion < toVersion, toVersion <= Self.maxVersion else {
            throw CoreError(code, "delta versions must satisfy 1 ≤ from (\(fromVersion)) < to (\(toVersion)) ≤ 2^53")
        }
        guard (1...Self.maxDimension).contains(dimension) else {
            throw CoreError(code, "delta dimension \(dimension) is outside 1...\(Self.maxDimension)")
        }
        try Self.checkAscending(upsertIDs, what: "upsert", code: code)
        try Self.checkAscending(deletes, what: "delete", code: code)
        if !deletes.isEmpty, !Set(deletes.map { Array($0.utf8) }).isDisjoint(with: upsertIDs.map { Array($0.utf8) }) {
            throw CoreError(code, "a delta may not both upsert and delete the same id")
        }
    }

    /// Upsert number `index`'s vector must have `dimension` finite values.
    static func check(vector: [Float], of index: Int, dimension: Int, code: CoreError.Code) throws(CoreError) {
        guard vector.count == dimension, vector.allSatisfy(\.isFinite) else {
            throw CoreError(code, "delta upsert #\(index) needs \(dimension) finite vector values")
        }
    }

    private static func checkAscending(_ ids: [String], what: String, code: CoreError.Code) throws(CoreError) {
        for (index, id) in ids.enumerated() {
            guard !id.utf8.isEmpty else { throw CoreError(code, "delta \(what) #\(index) has an empty id") }
            guard index == 0 || String.utf8Precedes(ids[index - 1], id) else {
                throw CoreError(code, "delta \(what) ids must be unique and ascending by UTF-8 bytes (at #\(index))")
            }
        }
    }
}
