import Foundation

/// Plain POSIX Unix-domain stream sockets: connect with a timeout-free blocking connect (local
/// sockets answer or refuse at once) and probe whether a path is being served.
public enum UnixSocket {
    public enum Probe: Sendable, Equatable {
        case accepting
        case refused
        case failed(Int32)
    }

    /// A connected socket descriptor, or the errno of the failure.
    public static func connect(_ path: String) -> Result<Int32, Errno> {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return .failure(Errno(errno)) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
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

    /// Whether something accepts connections on `path`.
    public static func probe(_ path: String) -> Probe {
        switch connect(path) {
        case .success(let fd):
            close(fd)
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
