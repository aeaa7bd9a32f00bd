/// Vectors as little-endian IEEE-754 float32 bytes: the snapshot's `embedding` column, the
/// embedding cache's, and what the embedding hash covers (protocol/state-root.md). On a
/// little-endian host these are the values' memory as it is, so nothing is converted value by
/// value (a byte-by-byte conversion was about a tenth of a 1,000-chunk delta's check and apply).
public enum VectorBytes {
    /// The vector's bytes, copied.
    public static func encode(_ vector: [Float]) -> [UInt8] {
        withBytes(of: vector) { Array($0) }
    }

    /// Calls `body` with the vector's bytes (its own memory on a little-endian host).
    public static func withBytes<R>(of vector: [Float], _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        #if _endian(little)
        return try vector.withUnsafeBytes(body)
        #else
        var bytes: [UInt8] = []
        bytes.reserveCapacity(vector.count * 4)
        for value in vector { withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) } }
        return try bytes.withUnsafeBytes(body)
        #endif
    }

    /// Appends the values of `bytes` (a whole number of float32s; a trailing part is ignored).
    public static func decode(_ bytes: UnsafeRawBufferPointer, into vector: inout [Float]) {
        let count = bytes.count / 4
        #if _endian(little)
        // Copied into an aligned scratch buffer (the bytes may be unaligned), then appended as
        // one block (both memcpy; appending zeros first went element by element).
        withUnsafeTemporaryAllocation(of: Float.self, capacity: count) { scratch in
            UnsafeMutableRawBufferPointer(scratch).copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[0..<count * 4]))
            vector.append(contentsOf: scratch)
        }
        #else
        for offset in stride(from: 0, to: count * 4, by: 4) {
            vector.append(Float(bitPattern: UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))))
        }
        #endif
    }

    public static func decode(_ bytes: [UInt8]) -> [Float] {
        var vector: [Float] = []
        vector.reserveCapacity(bytes.count / 4)
        bytes.withUnsafeBytes { decode($0, into: &vector) }
        return vector
    }
}
