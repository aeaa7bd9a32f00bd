import Crypto

/// Recomputes a stored chunk row's three hashes from the row's own bytes, compares them with
/// the hex digests stored beside them and gives the row's state-root leaf: what verifying a full
/// snapshot does for every row (protocol/snapshot.md, "Verification"), without building a
/// `Chunk`, a JSON value or a `ContentID` per hash. Reuses one buffer across rows; one per thread.
public struct StoredRowCheck {
    /// What one row's check found.
    public enum Outcome: Equatable, Sendable {
        /// The stored hashes match the data; the row's leaf (`StateRoot.Record.leaf`).
        case leaf(ContentID)
        /// A stored hash differs from the one recomputed from the data.
        case mismatch
        /// A stored hash is not 64 lowercase hexadecimal characters.
        case malformedHash
    }

    private var metadata: [UInt8] = []

    public init() {
        metadata.reserveCapacity(512)
    }

    /// Checks one row given as its stored bytes: text columns as UTF-8 (nil for NULL), `tags`
    /// decoded, `embedding` the little-endian float32 bytes, and the stored content, metadata and
    /// embedding hashes as hex text (nil for NULL).
    public mutating func check(id: String, title: UnsafeBufferPointer<UInt8>, content: UnsafeBufferPointer<UInt8>,
                               scenario: UnsafeBufferPointer<UInt8>?, tags: [String], source: UnsafeBufferPointer<UInt8>?,
                               embedding: UnsafeRawBufferPointer,
                               storedHashes: (UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?)) -> Outcome {
        metadata.removeAll(keepingCapacity: true)
        Chunk.writeMetadataJSON(title: title, scenario: scenario, tags: tags, source: source, to: &metadata)
        let contentHash = Self.digest(UnsafeRawBufferPointer(content))
        let metadataHash = metadata.withUnsafeBytes { Self.digest($0) }
        let embeddingHash = Self.digest(embedding)
        guard let contentOK = Self.compare(contentHash, hex: storedHashes.0),
              let metadataOK = Self.compare(metadataHash, hex: storedHashes.1),
              let embeddingOK = Self.compare(embeddingHash, hex: storedHashes.2) else { return .malformedHash }
        guard contentOK, metadataOK, embeddingOK else { return .mismatch }
        return contentHash.withUnsafeBytes { content in
            metadataHash.withUnsafeBytes { metadata in
                embeddingHash.withUnsafeBytes { embedding in
                    .leaf(StateRoot.leaf(id: id, contentHash: content, metadataHash: metadata, embeddingHash: embedding))
                }
            }
        }
    }

    private static func digest(_ bytes: UnsafeRawBufferPointer) -> SHA256.Digest {
        var hasher = SHA256()
        hasher.update(bufferPointer: bytes)
        return hasher.finalize()
    }

    /// Whether `hex` spells `digest` in lowercase hexadecimal; nil when it is not 64 such characters.
    static func compare(_ digest: SHA256.Digest, hex: UnsafeBufferPointer<UInt8>?) -> Bool? {
        guard let hex, hex.count == 64 else { return nil }
        return digest.withUnsafeBytes { bytes -> Bool? in
            var equal = true
            for index in 0..<32 {
                guard let high = ContentID.nibble(hex[2 * index]), let low = ContentID.nibble(hex[2 * index + 1]) else { return nil }
                equal = equal && bytes[index] == high << 4 | low
            }
            return equal
        }
    }
}
