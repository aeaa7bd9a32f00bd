import Foundation

/// A minimal HTTP/1.1 client over a real TCP socket, sending the request target byte for byte
/// (no normalisation of `..`, `%2e` or backslashes, unlike ordinary clients). Blocking calls run
/// on their own thread so that they never hold a Swift concurrency thread the server may need.
struct RawResponse {
    var status: Int
    var headers: [String: String]
    var body: [UInt8]
    func header(_ name: String) -> String? { headers[name.lowercased()] }
}

enum RawHTTP {
    /// Sends `GET`/`HEAD` etc. with `Connection: close` and reads the whole response.
    static func send(port: Int, method: String = "GET", target: String, headers: [String: String] = [:]) async throws -> RawResponse {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        let request = Array(text.utf8)
        let raw = try await onThread {
            let socket = try TCPSocket(port: port)
            defer { socket.close() }
            try socket.write(request)
            return try socket.readToEnd()
        }
        return try parse(raw, head: method == "HEAD")
    }

    static func parse(_ raw: [UInt8], head: Bool) throws -> RawResponse {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard raw.count >= 4, let end = (0...(max(0, raw.count - 4))).first(where: { Array(raw[$0..<$0 + 4]) == separator }) else {
            throw TestFailure("no header end in \(raw.count) bytes")
        }
        let lines = String(decoding: raw[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw TestFailure("bad status line \(lines[0])") }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return RawResponse(status: status, headers: headers, body: Array(raw[(end + 4)...]))
    }

    static func onThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try work() }) }.start()
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A blocking IPv4 loopback TCP connection with a 30 s receive timeout (so that no test hangs).
final class TCPSocket: Sendable {
    let fd: Int32

    init(port: Int, receiveBuffer: Int? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket() failed") }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if let receiveBuffer {
            var size = Int32(receiveBuffer)
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else { Glibc.close(fd); throw TestFailure("connect to port \(port) failed") }
    }

    func write(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TestFailure("send failed") }
            sent += n
        }
    }

    /// Up to `limit` bytes; empty at end of stream.
    func read(limit: Int = 65536) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: limit)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, limit, 0) }
        guard n >= 0 else { throw TestFailure("recv failed or timed out") }
        return Array(buffer[..<n])
    }

    func readToEnd(after prefix: [UInt8] = []) throws -> [UInt8] {
        var all = prefix
        while true {
            let chunk = try read()
            if chunk.isEmpty { return all }
            all += chunk
        }
    }

    func close() { Glibc.close(fd) }
}
