import CZlib

/// zlib (RFC 1950) compression of whole buffers, and decompression that refuses to produce
/// more than a stated number of bytes: a decompression bomb fails after at most that much work.
public enum Zlib {
    /// Compresses `input` at `level` (0–9, default 6).
    public static func compress(_ input: [UInt8], level: Int32 = 6) throws(StoreError) -> [UInt8] {
        var stream = z_stream()
        guard cairn_deflateInit(&stream, level) == Z_OK else {
            throw StoreError(.io, "zlib: cannot initialise compression")
        }
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))))
        let status = input.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBufferPointer { destination in
                stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
                stream.avail_in = uInt(source.count)
                stream.next_out = destination.baseAddress
                stream.avail_out = uInt(destination.count)
                return deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { throw StoreError(.io, "zlib: compression failed (\(status))") }
        output.removeSubrange(Int(stream.total_out)...)
        return output
    }

    /// Decompresses a complete zlib stream that must inflate to exactly `expectedSize` bytes.
    /// More output than that, a truncated stream, trailing bytes or a bad checksum all throw.
    public static func decompress(_ input: [UInt8], expectedSize: Int) throws(StoreError) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: expectedSize)
        var produced = 0
        try decompress(input, limit: expectedSize) { chunk in
            output.withUnsafeMutableBufferPointer { destination in
                _ = UnsafeMutableBufferPointer(rebasing: destination[produced..<(produced + chunk.count)]).initialize(from: chunk)
            }
            produced += chunk.count
        }
        guard produced == expectedSize else {
            throw StoreError(.corruptStream, "zlib stream inflates to \(produced) bytes, expected \(expectedSize)")
        }
        return output
    }

    /// Streams the decompressed bytes of `input` to `sink` in pieces, refusing to go past `limit`.
    public static func decompress(_ input: [UInt8], limit: Int,
                                  sink: (UnsafeBufferPointer<UInt8>) throws(StoreError) -> Void) throws(StoreError) {
        var stream = z_stream()
        guard cairn_inflateInit(&stream) == Z_OK else { throw StoreError(.io, "zlib: cannot initialise decompression") }
        defer { inflateEnd(&stream) }
        let bufferSize = 1 << 16
        var buffer = [UInt8](repeating: 0, count: bufferSize)
        var produced = 0
        var finished = false
        try input.withUnsafeBufferPointer { (source) throws(StoreError) in
            stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
            stream.avail_in = uInt(source.count)
            while !finished {
                let (status, count) = buffer.withUnsafeMutableBufferPointer { destination in
                    stream.next_out = destination.baseAddress
                    stream.avail_out = uInt(bufferSize)
                    let status = inflate(&stream, Z_NO_FLUSH)
                    return (status, bufferSize - Int(stream.avail_out))
                }
                switch status {
                case Z_OK, Z_STREAM_END:
                    break
                case Z_BUF_ERROR where count > 0:  // output was produced; the next call goes on
                    break
                case Z_BUF_ERROR:
                    throw StoreError(.corruptStream, "zlib stream is truncated")
                default:
                    throw StoreError(.corruptStream, "zlib stream is corrupt (\(status))")
                }
                produced += count
                guard produced <= limit else {
                    throw StoreError(.sizeLimitExceeded, "zlib stream inflates past its stated size of \(limit) bytes")
                }
                try buffer.withUnsafeBufferPointer { (pointer) throws(StoreError) in
                    try sink(UnsafeBufferPointer(rebasing: pointer[0..<count]))
                }
                if status == Z_STREAM_END { finished = true }
            }
            guard stream.avail_in == 0 else {
                throw StoreError(.corruptStream, "zlib stream has \(stream.avail_in) trailing bytes")
            }
        }
    }
}
