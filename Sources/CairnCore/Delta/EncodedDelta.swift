/// Bytes that stay at one address, unchanged, for as long as their owner lives: a mapping of a
/// file that no one else can write (`FileSystem.Mapping`).
public protocol StableBytes: AnyObject, Sendable {
    var bytes: UnsafeRawBufferPointer { get }
}

/// A delta read in place from its encoding (protocol/delta.md): checked whole, as `Delta.decode`
/// checks it, but holding only its header, the upserts' ids and where each starts, and the
/// deletes. Each upsert's text and vector are decoded when it is read, so a delta that rewrites
/// much of a large index costs its ids in memory, not its records: kept in a mapped file, the
/// encoding itself is page cache that the kernel can drop and read again.
public struct EncodedDelta: Sendable {
    public let fromVersion: Int
    public let toVersion: Int
    public let fromStateRoot: ContentID
    public let toStateRoot: ContentID
    /// The target's set hash (format 2), nil in format 1.
    public let toSetHash: ContentID?
    public let dimension: Int
    /// Chunks added or changed, ascending by id, decoded from `bytes` as they are read.
    public let upserts: ChunkRecords
    /// Ids of chunks removed, ascending.
    public let deletes: [String]

    /// - Throws: `.deltaMalformed` for anything `Delta.decode` refuses, as it refuses it.
    public init(_ encoding: any StableBytes) throws(CoreError) {
        let layout = try Delta.Layout(of: encoding.bytes)
        fromVersion = layout.fromVersion
        toVersion = layout.toVersion
        fromStateRoot = layout.fromStateRoot
        toStateRoot = layout.toStateRoot
        toSetHash = layout.toSetHash
        dimension = layout.dimension
        upserts = ChunkRecords(encoding, offsets: layout.upsertOffsets, ids: layout.upsertIDs, dimension: layout.dimension)
        deletes = layout.deletes
    }
}

/// Chunk records in a given order: held as values, or decoded from a checked delta's encoding
/// each time one is read (`EncodedDelta`). Their ids are held either way.
public struct ChunkRecords: RandomAccessCollection, Sendable {
    private enum Storage: Sendable {
        case values([ChunkRecord])
        case encoded(any StableBytes, offsets: [Int], dimension: Int)
    }

    private let storage: Storage
    /// The records' ids, in order, read without decoding a record.
    public let ids: [String]

    public init(_ records: [ChunkRecord]) {
        storage = .values(records)
        ids = records.map(\.chunk.id)
    }

    /// The length of a vector among the records that does not have `dimension` values, if any.
    /// A checked delta's vectors all have its dimension, so its records are not read.
    public func vectorLength(otherThan dimension: Int) -> Int? {
        switch storage {
        case .values(let records): records.lazy.map(\.vector.count).first { $0 != dimension }
        case .encoded(_, _, let encoded): encoded == dimension ? nil : encoded
        }
    }

    fileprivate init(_ encoding: any StableBytes, offsets: [Int], ids: [String], dimension: Int) {
        storage = .encoded(encoding, offsets: offsets, dimension: dimension)
        self.ids = ids
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { ids.count }

    public subscript(position: Int) -> ChunkRecord {
        switch storage {
        case .values(let records): records[position]
        case .encoded(let encoding, let offsets, let dimension):
            Delta.upsert(in: encoding.bytes, at: offsets[position], dimension: dimension)
        }
    }
}

extension ChunkRecords: ExpressibleByArrayLiteral {
    public init(arrayLiteral records: ChunkRecord...) { self.init(records) }
}
