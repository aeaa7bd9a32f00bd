import Foundation

/// Plain POSIX Unix-domain stream sockets: connect (a local socket answers or refuses at once,
/// unless its listener's queue is full: then Linux waits for room as long as the socket's send
/// timeout allows, forever by default) and probe whether a path is being served.
public enum UnixSocket {
    public enum Probe: Sendable, Equatable {
        case accepting
        case refused
        case failed(Int32)
    }

    /// A connected socket descriptor, or the errno of the failure: `EAGAIN` when the listener's
    /// queue stayed full for `timeout` seconds (a listener that is hung or overloaded).
    public static func connect(_ path: String, timeout: Double = 5) -> Result<Int32, Errno> {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return .failure(Errno(errno)) }
        var limit = timeval(timeout)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        // An empty path would be an address in Linux's abstract namespace (a first byte of 0),
        // not a file: no socket file has that name.
        guard !bytes.isEmpty else {
            close(fd)
            return .failure(Errno(ENOENT))
        }
        guard bytes.count < capacity else {
            close(fd)
            return .failure(Errno(ENAMETOOLONG))
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            return .failure(Errno(code))
        }
        return .success(fd)
    }

    /// Whether something accepts connections on `path` (a listener whose queue stays full for a
    /// second listens, and counts as accepting).
    public static func probe(_ path: String) -> Probe {
        switch connect(path, timeout: 1) {
        case .success(let fd):
            close(fd)
            return .accepting
        case .failure(let error) where error.code == EAGAIN:
            return .accepting
        case .failure(let error) where error.code == ECONNREFUSED:
            return .refused
        case .failure(let error):
            return .failed(error.code)
        }
    }

    /// An errno value.
    public struct Errno: Error, Sendable, Equatable, CustomStringConvertible {
        public let code: Int32
        public init(_ code: Int32) { self.code = code }
        public var description: String { String(cString: strerror(code)) }
    }
}

/// A timeout in seconds held between a millisecond and a year: zero would mean "no timeout" to
/// SO_RCVTIMEO (and "at once" to poll), and an infinite or huge count does not convert.
func boundedTimeout(_ seconds: Double) -> Double {
    seconds.isNaN ? 0.001 : min(max(seconds, 0.001), 31_536_000)
}

extension timeval {
    /// `seconds` as a `timeval` (whole seconds and microseconds), `boundedTimeout`.
    init(_ seconds: Double) {
        let seconds = boundedTimeout(seconds)
        self.init(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1e6))
    }
}
