import CairnCore
import Foundation

/// Conversions between `Chunk` / vectors and the columns of the `chunks` table.
enum ChunkRow {
    /// The vector as little-endian IEEE-754 float32 bytes (the `embedding` column).
    static func encode(_ vector: [Float]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(vector.count * 4)
        for value in vector {
            withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        }
        return bytes
    }

    /// Appends the little-endian float32 values of `bytes` to `vector`.
    static func decode(_ bytes: UnsafeRawBufferPointer, into vector: inout [Float]) {
        let count = bytes.count / 4
        #if _endian(little)
        // The stored bytes are the host's float32 layout: copied into an aligned scratch buffer
        // (the blob may be unaligned), then appended as one block (both memcpy; appending zeros
        // first went element by element).
        withUnsafeTemporaryAllocation(of: Float.self, capacity: count) { scratch in
            UnsafeMutableRawBufferPointer(scratch).copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[0..<count * 4]))
            vector.append(contentsOf: scratch)
        }
        #else
        for offset in stride(from: 0, to: count * 4, by: 4) {
            let bits = UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8
                | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
            vector.append(Float(bitPattern: bits))
        }
        #endif
    }

    static func decode(_ bytes: [UInt8]) -> [Float] {
        var vector: [Float] = []
        vector.reserveCapacity(bytes.count / 4)
        bytes.withUnsafeBytes { decode($0, into: &vector) }
        return vector
    }

    /// The `tags` column: canonical JSON array text.
    static func encodeTags(_ tags: [String]) -> String {
        String(decoding: CanonicalJSON.array(tags.map(CanonicalJSON.string)).bytes, as: UTF8.self)
    }

    static func decodeTags(_ text: String) throws(IndexError) -> [String] {
        // Most chunks have no tags; skip a JSONDecoder per row for them (install verification
        // and search read every row).
        if text == "[]" { return [] }
        do {
            return try JSONDecoder().decode([String].self, from: Data(text.utf8))
        } catch {
            throw IndexError(.snapshotMalformed, "a chunk's tags column is not a JSON array of strings")
        }
    }

    /// Reads a chunk from the current row of a statement that selected `SnapshotSchema.chunkColumns`
    /// starting at column `first`.
    static func chunk(from statement: Statement, first: Int32 = 0) throws(IndexError) -> Chunk {
        Chunk(id: statement.string(at: first) ?? "",
              title: statement.string(at: first + 1) ?? "",
              content: statement.string(at: first + 2) ?? "",
              scenario: statement.string(at: first + 3),
              tags: try decodeTags(statement.string(at: first + 4) ?? "[]"),
              source: statement.string(at: first + 5))
    }
}
