import CairnClient
import CairnDaemon
import CairnTestSupport
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Hostile and heavy callers on the real Unix socket of a real cairnd.
@Suite("Faults: callers", .offCooperativePool, .serialized)
struct CallerFaultTests {
    /// Sends `bytes` on a fresh connection and returns what comes back before the server
    /// closes or `seconds` pass (empty: closed without answering).
    static func raw(_ socket: String, _ bytes: [UInt8], seconds: Int = 10) -> String {
        guard case .success(let fd) = UnixSocket.connect(socket) else { return "<connect failed>" }
        defer { close(fd) }
        var limit = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { break }
            sent += n
        }
        shutdown(fd, Int32(SHUT_WR))
        var reply: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            reply += buffer[0..<n]
        }
        return String(decoding: reply, as: UTF8.self)
    }

    @Test("Given malformed HTTP and huge bodies on the socket, then each gets a 4xx or a closed connection and the daemon keeps answering")
    func malformedRequests() async throws {
        let rig = try await Rig()
        defer { rig.stop() }
        let big = [UInt8](repeating: 0x41, count: 8 << 20)
        let cases: [(String, [UInt8])] = [
            ("garbage bytes", (0..<4096).map { _ in UInt8.random(in: 0...255) }),
            ("bad request line", Array("BLAH /v1/status\r\n\r\n".utf8)),
            ("no version", Array("GET /v1/status HTTP/9.9\r\nHost: x\r\n\r\n".utf8)),
            ("oversize headers", Array("GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 200_000))\r\n\r\n".utf8)),
            ("10,000 headers", Array(("GET /v1/status HTTP/1.1\r\n" + (0..<10_000).map { "X-\($0): 1\r\n" }.joined() + "\r\n").utf8)),
            ("bad Content-Length", Array("POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Length: -7\r\n\r\n{}".utf8)),
            ("8 MiB body", Array("POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: \(big.count)\r\n\r\n".utf8) + big),
            ("8 MiB chunked body", Array("POST /v1/search HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n800000\r\n".utf8) + big + Array("\r\n0\r\n\r\n".utf8)),
            ("NUL bytes in the path", Array("GET /v1/chunks/\u{0}\u{0} HTTP/1.1\r\nHost: x\r\n\r\n".utf8)),
        ]
        let report = FaultReport("malformed HTTP and huge bodies on the socket")
        var statuses: [String] = []
        for (number, (name, bytes)) in cases.enumerated() {
            await report.trial(number + 1) {
                let reply = try await onThread { Self.raw(rig.device.socket, bytes) }
                let status = reply.split(separator: " ").dropFirst().first.map(String.init) ?? "closed"
                statuses.append("\(name) → \(status)")
                if reply.hasPrefix("HTTP/1.1 2") { return "\(name) was accepted: \(reply.prefix(80))" }
                if !reply.isEmpty && !reply.hasPrefix("HTTP/1.1 4") { return "\(name): \(reply.prefix(80))" }
                return rig.wrongAnswer(expecting: 1)
            }
        }
        #expect(report.finish("4xx or closed, daemon answering after each"))
        print("  " + statuses.joined(separator: "; "))
    }

    /// Connections that send the first `whole` bytes of `prefix` at once, then dribble the rest
    /// one byte at a time, and reconnect when dropped.
    final class SlowClients: @unchecked Sendable {
        // @unchecked: `descriptors` is only touched by the one thread that runs `loop`.
        private let stop = Atomic<Bool>(false)
        let reconnects = Atomic<Int>(0)
        private let socket: String
        private let prefix: [UInt8]
        private let whole: Int
        private var descriptors: [(fd: Int32, sent: Int)] = []
        /// The clients that connected and sent their start at once: the attack holds the slots.
        private(set) var connected = 0

        init(socket: String, count: Int, prefix: String, whole: Int = 0) {
            self.socket = socket
            self.prefix = Array(prefix.utf8)
            self.whole = whole
            for _ in 0..<count { descriptors.append((connect(), whole)) }
            connected = descriptors.filter { $0.fd >= 0 }.count
        }

        private func connect() -> Int32 {
            guard case .success(let fd) = UnixSocket.connect(socket) else { return -1 }
            var limit = timeval(tv_sec: 1, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            let sent = prefix.prefix(whole).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent == whole else {
                close(fd)
                return -1
            }
            return fd
        }

        /// Sends one more byte on every connection every 200 ms until `finish()`.
        func loop() {
            while !stop.load(ordering: .relaxed) {
                for i in descriptors.indices {
                    var (fd, sent) = descriptors[i]
                    let byte = prefix[sent % prefix.count]
                    if fd < 0 || withUnsafeBytes(of: byte, { send(fd, $0.baseAddress, 1, Int32(MSG_NOSIGNAL)) }) != 1 {
                        if fd >= 0 { close(fd) }
                        reconnects.add(1, ordering: .relaxed)
                        fd = connect()
                        sent = whole
                    } else {
                        sent = sent + 1 < prefix.count ? sent + 1 : prefix.count - 1
                    }
                    descriptors[i] = (fd, sent)
                }
                usleep(200_000)  // the attack's pace, not synchronisation
            }
            for (fd, _) in descriptors where fd >= 0 { close(fd) }
        }

        func finish() { stop.store(true, ordering: .relaxed) }
    }

    /// Three trials of a normal client's `GET /v1/status` (waiting up to 60 s for an answer).
    static func normalClient(_ rig: Rig, _ report: FaultReport) async {
        for number in 1...3 {
            await report.trial(number) {
                let answer = try await onThread {
                    try UnixHTTPClient(socketPath: rig.device.socket, timeout: 60).send(method: "GET", path: "/v1/status")
                }
                guard answer.status == 200 else { return "status \(answer.status)" }
                return rig.wrongAnswer(expecting: 1)
            }
        }
    }

    @Test("Given more slow clients than connection slots, dribbling headers, a body (its headers sent whole) or a body past its 413 a byte at a time, then a normal client still gets answers")
    func slowloris() async throws {
        let rig = try await Rig(config: ["max_connections": "16", "idle_timeout": "2"])
        defer { rig.stop() }
        // The headers of the body attacks are sent whole, so that the clients reach the body.
        let search = "POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        let attacks = [
            ("slow headers", "", "GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Slow: " + String(repeating: "a", count: 60_000)),
            ("slow body", search + "Content-Length: 60000\r\n\r\n", "{\"query\": \"" + String(repeating: "a", count: 59_000)),
            ("a body sent on after its 413", search + "Content-Length: 100000000\r\n\r\n", String(repeating: "a", count: 59_000)),
        ].map { ($0.0, $0.1 + $0.2, $0.1.utf8.count) }
        for (name, prefix, whole) in attacks {
            let report = FaultReport("slowloris: 40 clients with \(name), 16 slots")
            let clients = SlowClients(socket: rig.device.socket, count: 40, prefix: prefix, whole: whole)
            // Else the normal client would pass against no attack at all.
            #expect(clients.connected >= 16, "\(name): only \(clients.connected) slow clients connected")
            let attack = Thread { clients.loop() }
            attack.start()
            await Self.normalClient(rig, report)
            clients.finish()
            #expect(report.finish("a normal client answered each time; slow clients dropped \(clients.reconnects.load(ordering: .relaxed))×"))
        }
    }

    @Test("Given more clients than connection slots, each sending a thousand requests at once and never reading an answer, then a normal client still gets answers")
    func clientsThatNeverRead() async throws {
        let rig = try await Rig(config: ["max_connections": "16", "idle_timeout": "2"])
        defer { rig.stop() }
        let report = FaultReport("40 clients that send 1,000 requests each and read nothing, 16 slots")
        let burst = Array(repeating: Array("GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n".utf8), count: 1_000).flatMap { $0 }
        var descriptors: [Int32] = []
        defer { descriptors.forEach { close($0) } }
        for _ in 0..<40 {
            guard case .success(let fd) = UnixSocket.connect(rig.device.socket) else { continue }
            var limit = timeval(tv_sec: 1, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            _ = burst.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            descriptors.append(fd)
        }
        #expect(descriptors.count == 40)
        await Self.normalClient(rig, report)
        #expect(report.finish("a normal client answered each time"))
    }

    /// What the load test's clients and swapper share.
    final class Load: Sendable {
        let swaps = Atomic<Int>(0)
        let sent = Atomic<Int>(0)
        let versions = Mutex<Set<Int>>([])
    }

    @Test("Given 16 clients sending 1,000 queries while 10 new versions are swapped in, then no query fails and no answer mixes versions")
    func queriesDuringSwaps() async throws {
        let workspace = try Workspace()
        func kb(_ n: Int) -> Workspace.KB {
            [("v\(n)-boil", "Boil the water for one minute before you drink it, edition \(n)."),
             ("v\(n)-maps", "The flood maps show the safe routes to higher ground, edition \(n)."),
             ("v\(n)-radio", "A crank radio keeps working when the water is high, edition \(n)."),
             ("v\(n)-storm", "A storm can bring a flood of water within hours, edition \(n).")]
        }
        try workspace.publish(kb(1))
        let (server, url, _) = try await workspace.serve()
        defer { stopProcess(server) }
        let device = try DeviceProcess(workspace, sources: [url], name: "load")
        defer { device.stop() }
        try await device.waitForVersion(1)

        let load = Load()
        let report = FaultReport("≥ 1,000 queries from 16 clients during 10 swaps")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for client in 0..<16 {
                group.addTask {
                    try await onThread {
                        let mode = ["hybrid", "lexical", "dense", "rrf"][client % 4]
                        let http = UnixHTTPClient(socketPath: device.socket, timeout: 60)
                        let body = Array(#"{"query": "flood water edition", "k": 4, "mode": "\#(mode)", "min_similarity": -1}"#.utf8)
                        while load.sent.add(1, ordering: .relaxed).newValue <= 1_000 || load.swaps.load(ordering: .relaxed) < 10 {
                            do {
                                let answer = try http.send(method: "POST", path: "/v1/search", body: body)
                                let json = try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any] ?? [:]
                                let version = json["version"] as? Int ?? -1
                                let ids = (json["results"] as? [[String: Any]] ?? []).compactMap { ($0["chunk"] as? [String: Any])?["id"] as? String }
                                let mixed = ids.first { !$0.hasPrefix("v\(version)-") }
                                load.versions.withLock { _ = $0.insert(version) }
                                report.record(answer.status == 200 && !ids.isEmpty && mixed == nil,
                                              "status \(answer.status), version \(version), ids \(ids)")
                            } catch {
                                report.record(false, "\(error)")
                            }
                        }
                    }
                }
            }
            group.addTask {
                for n in 2...11 {
                    try workspace.publish(kb(n))
                    _ = try device.cairn(["sync"])
                    try await device.waitForVersion(n)
                    load.swaps.add(1, ordering: .relaxed)
                }
            }
            try await group.waitForAll()
        }
        let seen = load.versions.withLock { $0.count }
        #expect(report.finish("no failed query, each answer's chunks from the version it names; \(seen) versions answered"))
        #expect(report.trials >= 1_000 && load.swaps.load(ordering: .relaxed) == 10)
    }
}
