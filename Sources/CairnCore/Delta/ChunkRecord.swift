/// A chunk together with its embedding: the unit of a snapshot and of a delta upsert.
public struct ChunkRecord: Sendable, Equatable {
    public var chunk: Chunk
    /// The embedding, `dimension` float32 values.
    public var vector: [Float]

    public init(chunk: Chunk, vector: [Float]) {
        self.chunk = chunk
        self.vector = vector
    }

    /// The record's contribution to the state root.
    public var stateRecord: StateRoot.Record { StateRoot.Record(chunk: chunk, embedding: vector) }
}

extension StateRoot {
    /// The state root of `records` (ids must be unique).
    public static func compute(chunks records: [ChunkRecord]) -> ContentID {
        compute(records.map(\.stateRecord))
    }
}

extension String {
    /// Orders strings by their UTF-8 bytes, the order of every sorted id list in Cairn.
    public static func utf8Precedes(_ lhs: String, _ rhs: String) -> Bool {
        lhs.utf8.lexicographicallyPrecedes(rhs.utf8)
    }
}
