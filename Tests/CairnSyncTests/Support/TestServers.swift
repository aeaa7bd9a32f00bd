import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Waits for `condition` up to `seconds`, polling; true if it became true in time.
func eventually(within seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(20_000)
    }
    return condition()
}

/// SIGTERM, then SIGKILL if the process has not exited within 5 s, then reap it.
func stopProcess(_ process: Process) {
    guard process.isRunning else { return }
    process.terminate()
    if !eventually(within: 5, { !process.isRunning }) { kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
func isListening(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

/// A port the OS just handed out on 127.0.0.1 (for nginx, which cannot listen on port 0).
func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 ? getsockname(fd, pointer, &length) : -1
        }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// A real nginx serving a repository folder on loopback, configured in a temporary folder.
final class Nginx {
    static let binary = ["/usr/sbin/nginx", "/usr/bin/nginx"].first { FileManager.default.isExecutableFile(atPath: $0) }
    let port: Int
    let folder: String
    private let process = Process()
    var url: String { "http://127.0.0.1:\(port)" }
    var accessLog: [String] {
        ((try? String(contentsOfFile: folder + "/access.log", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    init(root: String) throws {
        guard let binary = Self.binary else { throw TestSkip("nginx is not installed (apt-get install nginx)") }
        let folder = try Temporary.directory("nginx")
        let port = freePort()
        self.folder = folder
        self.port = port
        let config = """
            daemon off; worker_processes 1; pid \(folder)/nginx.pid; error_log \(folder)/error.log;
            events { worker_connections 64; }
            http {
              log_format bytes '$request_uri $status $bytes_sent';
              access_log \(folder)/access.log bytes;
              client_body_temp_path \(folder)/body; proxy_temp_path \(folder)/proxy;
              fastcgi_temp_path \(folder)/fastcgi; uwsgi_temp_path \(folder)/uwsgi; scgi_temp_path \(folder)/scgi;
              types { application/json json; } default_type application/octet-stream;
              server { listen 127.0.0.1:\(port); root \(root); etag on; }
            }
            """
        try config.write(toFile: folder + "/nginx.conf", atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["-e", folder + "/error.log", "-p", folder, "-c", folder + "/nginx.conf"]
        try process.run()
        guard eventually({ isListening(port) }) else {
            stop()
            throw TestSkip("nginx did not start: " + ((try? String(contentsOfFile: folder + "/error.log", encoding: .utf8)) ?? ""))
        }
    }

    func stop() { stopProcess(process) }
}

/// Tests/CairnSyncTests/Fixtures/fault_server.py: a real TCP server producing real faults.
final class FaultServer {
    let folder: String
    let port: Int
    private let process = Process()
    var url: String { "http://127.0.0.1:\(port)" }
    /// One entry per request: path, status, range, body bytes sent.
    var requests: [(path: String, status: Int, range: String, sent: Int)] {
        ((try? String(contentsOfFile: folder + "/requests.log", encoding: .utf8)) ?? "").split(separator: "\n").map {
            let f = $0.split(separator: " ").map(String.init)
            return (f[0], Int(f[1]) ?? 0, f[2], Int(f[3]) ?? 0)
        }
    }

    init(root: String, _ options: [String]) throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/fault_server.py").path
        let folder = try Temporary.directory("fault")
        self.folder = folder
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, "--root", root, "--port-file", folder + "/port",
                             "--log", folder + "/requests.log"] + options
        try process.run()
        var port = 0
        guard eventually({
            port = Int((try? String(contentsOfFile: folder + "/port", encoding: .utf8)) ?? "") ?? 0
            return port > 0 && isListening(port)
        }) else {
            stopProcess(process)
            throw TestSkip("the fault server did not start (python3 missing?)")
        }
        self.port = port
    }

    func stop() { stopProcess(process) }
}

struct TestSkip: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// `eventually` for async tests: polls without blocking a cooperative thread.
func eventuallyAsync(within seconds: Double = 20, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}
