public import CairnCore

/// What a snapshot says about itself: the rows of its `meta` table.
public struct SnapshotMeta: Hashable, Sendable, Codable {
    /// The format this build writes and reads.
    public static let currentFormat = "cairn-snapshot-1"

    public var format: String
    public var channel: String
    public var version: Int
    public var stateRoot: ContentID
    /// Values per embedding vector.
    public var dimension: Int
    /// The embedding model that produced the vectors (and must embed queries).
    public var modelID: String
    public var chunkCount: Int

    public init(channel: String, version: Int, stateRoot: ContentID, dimension: Int, modelID: String,
                chunkCount: Int, format: String = SnapshotMeta.currentFormat) {
        self.format = format
        self.channel = channel
        self.version = version
        self.stateRoot = stateRoot
        self.dimension = dimension
        self.modelID = modelID
        self.chunkCount = chunkCount
    }

    /// The meta of a version made of exactly `entries`: state root and chunk count computed.
    public init(channel: String, version: Int, dimension: Int, modelID: String, entries: [ChunkRecord]) {
        self.init(channel: channel, version: version,
                  stateRoot: StateRoot.compute(chunks: entries),
                  dimension: dimension, modelID: modelID, chunkCount: entries.count)
    }

    enum Key {
        static let format = "format"
        static let channel = "channel"
        static let version = "version"
        static let stateRoot = "state_root"
        static let dimension = "dimension"
        static let modelID = "model_id"
        static let chunkCount = "chunk_count"
    }

    enum CodingKeys: String, CodingKey {
        case format, channel, version
        case stateRoot = "state_root"
        case dimension
        case modelID = "model_id"
        case chunkCount = "chunk_count"
    }

    /// The `meta` table's rows.
    var rows: [(String, String)] {
        [(Key.format, format), (Key.channel, channel), (Key.version, String(version)),
         (Key.stateRoot, stateRoot.hex), (Key.dimension, String(dimension)),
         (Key.modelID, modelID), (Key.chunkCount, String(chunkCount))]
    }

    /// Parses the `meta` table's rows; refuses unknown formats and missing or malformed values.
    init(rows: [String: String]) throws(IndexError) {
        func value(_ key: String) throws(IndexError) -> String {
            guard let value = rows[key] else {
                throw IndexError(.snapshotMalformed, "the snapshot's meta table has no \(key); rebuild or re-download it")
            }
            return value
        }
        func integer(_ key: String) throws(IndexError) -> Int {
            guard let number = Int(try value(key)), number >= 0 else {
                throw IndexError(.snapshotMalformed, "the snapshot's meta \(key) is not a non-negative integer")
            }
            return number
        }
        let format = try value(Key.format)
        guard format == SnapshotMeta.currentFormat else {
            throw IndexError(.snapshotMalformed, "unsupported snapshot format (this build reads \(SnapshotMeta.currentFormat))")
        }
        guard let root = ContentID(hex: try value(Key.stateRoot)) else {
            throw IndexError(.snapshotMalformed, "the snapshot's meta state_root is not a SHA-256 hex digest")
        }
        let dimension = try integer(Key.dimension)
        guard (1...Delta.maxDimension).contains(dimension) else {
            throw IndexError(.snapshotMalformed, "the snapshot's meta dimension is outside 1...\(Delta.maxDimension)")
        }
        // Row counts and numbers are 32-bit in the rows files: a damaged count must not reach
        // the size arithmetic built on them.
        let chunkCount = try integer(Key.chunkCount)
        guard chunkCount < Int(Int32.max) else {
            throw IndexError(.snapshotMalformed, "the snapshot's meta chunk_count \(chunkCount) is past the largest a snapshot holds")
        }
        self.init(channel: try value(Key.channel), version: try integer(Key.version), stateRoot: root,
                  dimension: dimension, modelID: try value(Key.modelID), chunkCount: chunkCount,
                  format: format)
    }
}
