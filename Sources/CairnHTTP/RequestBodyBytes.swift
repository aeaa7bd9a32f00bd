public import Hummingbird
import NIOCore

extension Request {
    /// The request body's bytes, or nil when it holds more than `limit` bytes (the rest is
    /// not read here). Throws what the body stream throws when it breaks off: the connection
    /// closed or a malformed chunk before the body's end.
    public func bodyBytes(upTo limit: Int) async throws -> [UInt8]? {
        do {
            var buffer = try await body.collect(upTo: limit)
            return buffer.readBytes(length: buffer.readableBytes) ?? []
        } catch is NIOTooManyBytesError {
            return nil
        }
    }
}
