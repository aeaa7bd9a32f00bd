import Foundation

/// A small blocking HTTP/1.1 client over a Unix domain socket, for the `cairn` CLI and tests:
/// one request per connection (`Connection: close`), a body with `Content-Length`, a response
/// read to its `Content-Length` (or chunked, or to end of stream). Each call blocks its thread.
public struct UnixHTTPClient: Sendable {
    public struct Response: Sendable {
        public var status: Int
        /// Header names lowercased.
        public var headers: [String: String]
        public var body: [UInt8]
    }

    public let socketPath: String
    /// Seconds a send or receive may block before the call fails with `unreachable`.
    public var timeout: Double

    /// Seconds a connect may wait for room in cairnd's queue (at most `timeout`): a cairnd that
    /// is alive takes a connection at once, even when busy.
    public static let connectTimeout: Double = 5

    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }

    public init(socketPath: String, timeout: Double = 60) {
        self.socketPath = socketPath
        self.timeout = timeout
    }

    /// Sends one request; `unreachable` when the socket cannot be reached (or the connection is
    /// closed unanswered), `no_answer` when cairnd took the request but did not answer within
    /// `timeout` (counted from the connection, however the answer trickles in),
    /// `protocol_violation` when the answer is not HTTP/1.1.
    public func send(method: String, path: String, body: [UInt8]? = nil,
                     contentType: String? = "application/json", headers: [(String, String)] = []) throws(ClientError) -> Response {
        let fd: Int32
        let waitForRoom = min(timeout, Self.connectTimeout)
        switch UnixSocket.connect(socketPath, timeout: waitForRoom) {
        case .success(let connected): fd = connected
        case .failure(let error) where error.code == EAGAIN:
            throw ClientError(.unreachable, "cairnd at \(socketPath) did not take the connection within \(Self.seconds(waitForRoom)) s (its queue is full: it is hung or overloaded)", cause: error)
        case .failure(let error):
            throw ClientError(.unreachable, "cannot reach cairnd at \(socketPath) (\(error))", cause: error)
        }
        defer { close(fd) }
        // One deadline for the whole exchange: a wait per read would let an answer that comes a
        // byte at a time hold the caller for ever.
        let deadline = ContinuousClock.now + .seconds(boundedTimeout(timeout))

        var head = "\(method) \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAccept: application/json\r\n"
        if let body {
            head += "Content-Length: \(body.count)\r\n"
            if let contentType { head += "Content-Type: \(contentType)\r\n" }
        }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        // A server may answer (e.g. 413) and close before reading a large body: a failed write
        // is not fatal as long as a response can still be read.
        let wrote = write(fd, Array(head.utf8) + (body ?? []), until: deadline)
        let (received, timedOut) = read(fd, until: deadline)
        if timedOut {
            // It took the request: it is running, and may still be doing what was asked.
            throw ClientError(.noAnswer, "cairnd at \(socketPath) took the request but did not answer within \(Self.seconds(timeout)) s; it may still be working on it (cairn status shows what it is doing)")
        }
        guard !received.isEmpty else {
            let reason = wrote ? "closed the connection without answering" : "refused the request"
            throw ClientError(.unreachable, "cairnd at \(socketPath) \(reason)")
        }
        return try HTTPResponseParser.parse(received, bodiless: method == "HEAD")
    }

    /// Sends `bytes`, but stops early when the server answers first (e.g. 413 for a large body:
    /// cairnd then stops reading, so blindly writing on would block until its idle timeout).
    /// Returns whether everything was sent.
    private func write(_ fd: Int32, _ bytes: [UInt8], until deadline: ContinuousClock.Instant) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let wait = Self.milliseconds(until: deadline)
            guard wait > 0 else { return false }
            var events = pollfd(fd: fd, events: Int16(POLLIN | POLLOUT), revents: 0)
            let ready = poll(&events, 1, wait)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0, events.revents & Int16(POLLIN | POLLERR | POLLHUP) == 0 else { return false }
            let end = min(bytes.count, offset + 65_536)
            let sent = bytes[offset..<end].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
            if sent < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) { continue }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    /// The response's bytes, and whether `deadline` ended the wait before a complete response
    /// came.
    private func read(_ fd: Int32, until deadline: ContinuousClock.Instant) -> (bytes: [UInt8], timedOut: Bool) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            // Asked before each read, not only when none is ready: an answer that keeps coming
            // past the deadline ends there too.
            let wait = Self.milliseconds(until: deadline)
            guard wait > 0 else { return (received, true) }
            var events = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&events, 1, wait)
            if ready < 0 && errno != EINTR { break }
            // A wait past poll's longest (24.8 days) comes back to the deadline's check.
            if ready <= 0 { continue }
            let count = buffer.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) { continue }
            guard count > 0 else { break }
            received += buffer[0..<count]
            if HTTPResponseParser.isComplete(received) { break }
        }
        return (received, false)
    }

    /// What is left until `deadline`, in whole milliseconds for `poll` (at least 1 until it has
    /// passed, then 0).
    private static func milliseconds(until deadline: ContinuousClock.Instant) -> Int32 {
        let left = ContinuousClock.now.duration(to: deadline)
        guard left > .zero else { return 0 }
        let (seconds, attoseconds) = left.components
        return Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
    }
}
