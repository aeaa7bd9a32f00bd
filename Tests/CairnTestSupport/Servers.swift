public import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Waits for `condition` up to `seconds`, polling; true if it became true in time.
public func eventually(within seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(20_000)
    }
    return condition()
}

/// SIGTERM, then SIGKILL if the process has not exited within 5 s, then reap it.
public func stopProcess(_ process: Process) {
    guard process.isRunning else { return }
    process.terminate()
    if !eventually(within: 5, { !process.isRunning }) { kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
public func isListening(_ port: Int) -> Bool {
    guard let fd = connectTCP(port) else { return false }
    close(fd)
    return true
}

/// A socket connected to 127.0.0.1:`port` (the caller closes it), or nil when none connects.
public func connectTCP(_ port: Int) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
    guard connected else {
        close(fd)
        return nil
    }
    return fd
}

/// A port the OS just handed out on 127.0.0.1 (for nginx, which cannot listen on port 0).
/// Another process may take it before the caller binds it: start servers on it with
/// `startOnFreePort`, which checks whose listener answers.
public func freePort() -> Int {
    guard let bound = try? TCPListener(listening: false) else { return 0 }
    defer { bound.close() }
    return bound.port
}

/// Whether process `pid` itself holds a socket listening on 127.0.0.1:`port` (from
/// /proc/net/tcp and the process's descriptors), so a server that lost its port to another
/// test's server is not mistaken for one that started.
public func holdsListener(_ pid: Int32, port: Int) -> Bool {
    guard let table = try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8) else { return false }
    let local = "0100007F:" + String(format: "%04X", port)
    let inodes = Set(table.split(separator: "\n").dropFirst().compactMap { line -> String? in
        let fields = line.split(separator: " ")
        // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
        guard fields.count > 9, fields[1] == local, fields[3] == "0A" else { return nil }
        return "socket:[\(fields[9])]"
    })
    guard !inodes.isEmpty, let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return false }
    return descriptors.contains { inodes.contains((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/" + $0)) ?? "") }
}

/// Starts a server that must be told its port: `start` launches it on a free port, and the
/// launch counts once that process holds the listener; if it exits first (the port was taken
/// between `freePort` and its bind), it is tried again on another port.
/// `ports` hands out the port of each attempt.
public func startOnFreePort(seconds: Double = 30, attempts: Int = 3, ports: () -> Int = freePort,
                            _ start: (Int) throws -> Process) throws -> (process: Process, port: Int) {
    var failure = "no attempt"
    for _ in 0..<attempts {
        let port = ports()
        let process = try start(port)
        var exited = false
        if eventually(within: seconds, {
            exited = !process.isRunning
            return exited || holdsListener(process.processIdentifier, port: port)
        }), !exited {
            return (process, port)
        }
        stopProcess(process)
        failure = exited ? "it exited (status \(process.terminationStatus)) on port \(port)" : "it did not listen on port \(port) within \(Int(seconds)) s"
    }
    throw TestSkip("the server did not start: " + failure)
}

/// A TCP socket bound to a port the OS picks on 127.0.0.1, listening unless told not to (a
/// port another process holds, for the "port taken" case).
public struct TCPListener: Sendable {
    public let fd: Int32
    public let port: Int

    public init(listening: Bool = true) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound, !listening || listen(fd, 4) == 0 else {
            Glibc.close(fd)
            throw StepFailed("cannot bind a TCP port on 127.0.0.1")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    public func close() { Glibc.close(fd) }
}

/// A Unix socket bound at `path`, listening unless told not to (closed unlistened, it is what
/// a crashed daemon leaves behind).
public struct UnixListener: Sendable {
    public let fd: Int32

    public init(path: String, listening: Bool = true) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, !listening || listen(fd, 4) == 0 else {
            Glibc.close(fd)
            throw StepFailed("cannot bind a Unix socket at \(path)")
        }
        self.fd = fd
    }

    public func close() { Glibc.close(fd) }
}

/// A real nginx serving a repository folder on loopback, configured in a temporary folder.
public final class Nginx {
    public static let binary = ["/usr/sbin/nginx", "/usr/bin/nginx"].first { FileManager.default.isExecutableFile(atPath: $0) }
    public let port: Int
    public let folder: String
    private let process: Process
    /// Whether it serves HTTPS (`tls` given).
    public let https: Bool
    public var url: String { "\(https ? "https" : "http")://127.0.0.1:\(port)" }
    public var accessLog: [String] {
        ((try? String(contentsOfFile: folder + "/access.log", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// The access log's lines after its first `before`, once at least `count` of them are there
    /// (or as they are after 30 s): nginx writes a request's line after its answer, so a client
    /// that has the answer may look before the line is written.
    public func accessLog(after before: Int, atLeast count: Int) async -> [String] {
        _ = await eventuallyAsync(within: 30) { accessLog.count - before >= count }
        return Array(accessLog.dropFirst(before))
    }

    /// Whether a line of the access log satisfies `line`, waiting up to 30 s for it to be written.
    public func logged(_ line: (String) -> Bool) async -> Bool {
        await eventuallyAsync(within: 30) { accessLog.contains(where: line) }
    }

    /// TLS for the server: its certificate and key (PEM files); `serverLines` are added to the
    /// `server` block (client verification, authentication).
    public struct TLS {
        public var certificate: String
        public var key: String
        public init(certificate: String, key: String) {
            self.certificate = certificate
            self.key = key
        }
    }

    public init(root: String, tls: TLS? = nil, serverLines: String = "") throws {
        let binary = try requireOrSkip(Self.binary, "nginx is not installed (apt-get install nginx)")
        let folder = try TemporaryDirectory.make()
        self.folder = folder
        https = tls != nil
        do {
            (process, port) = try startOnFreePort(seconds: 10) { port in
                let listen = tls.map { "listen 127.0.0.1:\(port) ssl; ssl_certificate \($0.certificate); ssl_certificate_key \($0.key);" }
                    ?? "listen 127.0.0.1:\(port);"
                let config = """
                    daemon off; worker_processes 1; pid \(folder)/nginx.pid; error_log \(folder)/error.log;
                    events { worker_connections 64; }
                    http {
                      log_format bytes '$request_uri $status $bytes_sent $connection';
                      access_log \(folder)/access.log bytes;
                      client_body_temp_path \(folder)/body; proxy_temp_path \(folder)/proxy;
                      fastcgi_temp_path \(folder)/fastcgi; uwsgi_temp_path \(folder)/uwsgi; scgi_temp_path \(folder)/scgi;
                      types { application/json json; } default_type application/octet-stream;
                      server { \(listen) root \(root); etag on; \(serverLines) }
                    }
                    """
                try config.write(toFile: folder + "/nginx.conf", atomically: true, encoding: .utf8)
                let process = Process()
                process.executableURL = URL(fileURLWithPath: binary)
                process.arguments = ["-e", folder + "/error.log", "-p", folder, "-c", folder + "/nginx.conf"]
                try process.spawn()
                return process
            }
        } catch let failure as TestSkip {
            throw TestSkip("nginx did not start (\(failure)): " + ((try? String(contentsOfFile: folder + "/error.log", encoding: .utf8)) ?? ""))
        }
    }

    public func stop() { stopProcess(process) }
}

/// A part a test needs is missing (thrown, so the test fails and says what to install).
public struct TestSkip: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

