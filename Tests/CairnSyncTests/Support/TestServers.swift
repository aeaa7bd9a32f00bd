import CairnTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

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
        let folder = try TemporaryDirectory.make()
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

/// `eventually` for async tests: polls without blocking a cooperative thread.
func eventuallyAsync(within seconds: Double = 20, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}
