import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Tests/CairnTestSupport/Fixtures/fault_server.py: a real TCP server on loopback producing the
/// faults nginx cannot produce on demand (cut connections, stalls, garbage, wrong lengths, 500s).
/// Faults come from its flags at start, or from `set(_:)` while it runs (its control file).
public final class FaultServer: @unchecked Sendable {
    // @unchecked: `process` is replaced only by `restart()`, which tests call from one task.
    public let folder: String
    public let port: Int
    private let root: String
    private let options: [String]
    private var process = Process()
    public var url: String { "http://127.0.0.1:\(port)" }
    /// One entry per request: path, status, range, body bytes sent.
    public var requests: [(path: String, status: Int, range: String, sent: Int)] {
        ((try? String(contentsOfFile: folder + "/requests.log", encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
            let f = $0.split(separator: " ").map(String.init)
            return f.count == 4 ? (f[0], Int(f[1]) ?? 0, f[2], Int(f[3]) ?? 0) : nil  // a line being written is not one yet
        }
    }
    public static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/fault_server.py").path
    public static let available = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")
        || (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").contains {
            FileManager.default.isExecutableFile(atPath: "\($0)/python3")
        }

    /// Skips the test where python3 is missing (fails it under CAIRN_REQUIRE_MODEL=1).
    public init(root: String, _ options: [String] = []) throws {
        try requireOrSkip(Self.available, "python3 is not installed (apt-get install python3)")
        folder = try TemporaryDirectory.make()
        self.root = root
        self.options = options
        port = try Self.start(process, root: root, folder: folder, options: options, port: 0)
    }

    private static func start(_ process: Process, root: String, folder: String, options: [String], port: Int) throws -> Int {
        try? FileManager.default.removeItem(atPath: folder + "/port")
        return try spawn(process, script: script, folder: folder, what: "the fault server",
                         ["--root", root, "--port", String(port), "--control", folder + "/control.json"] + options)
    }

    /// Starts the fixture `script` with python3, its port file and request log in `folder`, and
    /// returns the port once it listens (a `TestSkip` naming `what` if it does not).
    static func spawn(_ process: Process, script: String, folder: String, what: String, _ arguments: [String]) throws -> Int {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, "--port-file", folder + "/port", "--log", folder + "/requests.log"] + arguments
        try process.spawn()
        var bound = 0
        // python3's start-up can take over ten seconds in the loaded parallel suite (a missing
        // python3 is skipped before this, by `available`).
        guard eventually(within: 60, {
            bound = Int((try? String(contentsOfFile: folder + "/port", encoding: .utf8)) ?? "") ?? 0
            return bound > 0 && isListening(bound)
        }) else {
            stopProcess(process)
            throw TestSkip("\(what) did not start (python3 missing?)")
        }
        return bound
    }

    /// Faults in force from the next request on (keys: see fault_server.py's --control).
    public func set(_ faults: [String: Any]) throws {
        let data = try JSONSerialization.data(withJSONObject: faults)
        try data.write(to: URL(fileURLWithPath: folder + "/control.json.tmp"))
        rename(folder + "/control.json.tmp", folder + "/control.json")
    }

    /// No faults from the next request on.
    public func clear() throws { try set([:]) }

    /// SIGKILL: the server dies with its connections (a crash, a pulled cable on its side).
    public func kill() {
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Starts again on the same port, after `kill()` or `stop()`.
    public func restart() throws {
        process = Process()
        _ = try Self.start(process, root: root, folder: folder, options: options, port: port)
    }

    public func stop() { stopProcess(process) }
}

/// `eventually` for async tests: polls without blocking a cooperative thread.
public func eventuallyAsync(within seconds: Double = 20, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}

/// Tests/CairnTestSupport/Fixtures/forward_proxy.py: a real forward proxy on loopback (absolute-form
/// requests relayed, CONNECT tunnels), optionally asking for Basic credentials, as a site's proxy
/// stands between its devices and the net.
public final class ForwardProxy: @unchecked Sendable {
    // @unchecked: every stored property is a constant.
    public let folder: String
    public let port: Int
    private let process = Process()
    /// Whether it speaks TLS to its clients (an `https://` proxy).
    public let https: Bool
    public var url: String { "\(https ? "https" : "http")://127.0.0.1:\(port)" }
    /// One entry per request: method, target (an absolute URL, or host:port for CONNECT), status.
    public var requests: [(method: String, target: String, status: Int)] {
        ((try? String(contentsOfFile: folder + "/requests.log", encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
            let f = $0.split(separator: " ").map(String.init)
            return f.count == 3 ? (f[0], f[1], Int(f[2]) ?? 0) : nil  // a line being written is not one yet
        }
    }

    /// `auth`: `user:password` it asks for (407 without); nil asks for none. `tls`: its
    /// certificate and key (PEM files), for an `https://` proxy. Skips the test where python3 is
    /// missing (fails it under CAIRN_REQUIRE_MODEL=1).
    public init(auth: String? = nil, tls: (certificate: String, key: String)? = nil) throws {
        try requireOrSkip(FaultServer.available, "python3 is not installed (apt-get install python3)")
        let folder = try TemporaryDirectory.make()
        self.folder = folder
        https = tls != nil
        let script = URL(fileURLWithPath: FaultServer.script).deletingLastPathComponent().appendingPathComponent("forward_proxy.py").path
        port = try FaultServer.spawn(process, script: script, folder: folder, what: "the forward proxy",
                                     (auth.map { ["--auth", $0] } ?? []) + (tls.map { ["--tls-cert", $0.certificate, "--tls-key", $0.key] } ?? []))
    }

    public func stop() { stopProcess(process) }

    deinit { stopProcess(process) }
}
