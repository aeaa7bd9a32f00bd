import Crypto

/// What a version *is*: one hash over its sorted chunk records, independent of any file's bytes
/// (protocol/state-root.md).
public enum StateRoot {
    /// One chunk's contribution: its id and the hashes of its content, metadata and embedding.
    public struct Record: Hashable, Sendable {
        public var id: String
        public var contentHash: ContentID
        public var metadataHash: ContentID
        public var embeddingHash: ContentID

        public init(id: String, contentHash: ContentID, metadataHash: ContentID, embeddingHash: ContentID) {
            self.id = id
            self.contentHash = contentHash
            self.metadataHash = metadataHash
            self.embeddingHash = embeddingHash
        }

        public init(chunk: Chunk, embedding: [Float]) {
            self.init(id: chunk.id, contentHash: chunk.contentHash, metadataHash: chunk.metadataHash,
                      embeddingHash: StateRoot.embeddingHash(embedding))
        }

        /// SHA-256(u32be(len(id)) ‖ id ‖ contentHash ‖ metadataHash ‖ embeddingHash).
        public var leaf: ContentID {
            contentHash.bytes.withUnsafeBytes { content in
                metadataHash.bytes.withUnsafeBytes { metadata in
                    embeddingHash.bytes.withUnsafeBytes { embedding in
                        StateRoot.leaf(id: id, contentHash: content, metadataHash: metadata, embeddingHash: embedding)
                    }
                }
            }
        }
    }

    /// A record's leaf from its id and its three 32-byte digests.
    static func leaf(id: String, contentHash: UnsafeRawBufferPointer, metadataHash: UnsafeRawBufferPointer,
                     embeddingHash: UnsafeRawBufferPointer) -> ContentID {
        var hasher = SHA256()
        var id = id
        id.withUTF8 { utf8 in
            withUnsafeBytes(of: UInt32(utf8.count).bigEndian) { hasher.update(bufferPointer: $0) }
            hasher.update(bufferPointer: UnsafeRawBufferPointer(utf8))
        }
        hasher.update(bufferPointer: contentHash)
        hasher.update(bufferPointer: metadataHash)
        hasher.update(bufferPointer: embeddingHash)
        return ContentID(bytes: Array(hasher.finalize()))!
    }

    static let domain = Array("cairn-state-root-v1\n".utf8)

    /// SHA-256("cairn-state-root-v1\n" ‖ u64be(n) ‖ leaf₁ ‖ … ‖ leafₙ), records sorted by the
    /// UTF-8 bytes of their ids. Ids must be unique.
    public static func compute<S: Sequence>(_ records: S) -> ContentID where S.Element == Record {
        compute(orderedLeaves: records.sorted { $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) }.map(\.leaf))
    }

    /// The same root from leaves already in UTF-8 byte order of their ids (not checked: leaves
    /// out of order give another root, which the signed one then refuses).
    public static func compute(orderedLeaves leaves: [ContentID]) -> ContentID {
        var root = Accumulator(count: leaves.count)
        for leaf in leaves { leaf.bytes.withUnsafeBytes { root.add(leaf: $0) } }
        return root.finalize()
    }

    /// The same root over leaves given one at a time, in order, without holding them: `count`
    /// leaves must follow.
    public struct Accumulator {
        private var hasher = SHA256()

        public init(count: Int) {
            hasher.update(data: StateRoot.domain)
            withUnsafeBytes(of: UInt64(count).bigEndian) { hasher.update(bufferPointer: $0) }
        }

        /// Adds the next leaf's 32 bytes.
        public mutating func add(leaf: UnsafeRawBufferPointer) { hasher.update(bufferPointer: leaf) }

        public func finalize() -> ContentID { ContentID(bytes: Array(hasher.finalize()))! }
    }

    /// SHA-256 of the vector as little-endian IEEE-754 float32 values.
    public static func embeddingHash(_ vector: [Float]) -> ContentID {
        VectorBytes.withBytes(of: vector) { ContentID(hashing: $0) }
    }
}
