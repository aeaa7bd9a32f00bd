import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// systemd's notify protocol, read from a real `NOTIFY_SOCKET` datagram socket that the test
/// binds, as systemd would: a bound AF_UNIX datagram socket collecting what cairnd sends. With `draining`, a thread
/// reads it as systemd does; without, nothing reads it, like a service manager that is busy
/// (its queue then fills after `net.unix.max_dgram_qlen` datagrams).
public final class NotifySocket: @unchecked Sendable {
    // @unchecked: `fd` and `path` are constants; `received` and `open` are guarded by Mutexes.
    let fd: Int32
    public let path: String
    private let received = Mutex<[String]>([])
    private let open = Mutex(true)
    /// Signalled when the reading thread has stopped: only then is `fd` closed, so the
    /// thread never reads a descriptor number that the process has given to another file.
    private let readerStopped = DispatchSemaphore(value: 0)
    private let draining: Bool

    public init(path: String, draining: Bool = true) throws {
        self.path = path
        self.draining = draining
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw StepFailed("cannot make a datagram socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw StepFailed("cannot bind \(path): \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if draining {
            Thread.detachNewThread { [self] in
                while open.withLock({ $0 }) { receive() }
                readerStopped.signal()
            }
        }
    }

    /// Reads one datagram if one comes within the receive timeout.
    private func receive() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, 0)
        if count > 0 { received.withLock { $0.append(String(decoding: buffer.prefix(count), as: UTF8.self)) } }
    }

    /// Every datagram received so far.
    public var messages: [String] { received.withLock { $0 } }

    public func close() {
        open.withLock { $0 = false }
        if draining { readerStopped.wait() }  // at most one receive timeout (100 ms)
        Glibc.close(fd)
    }
}
