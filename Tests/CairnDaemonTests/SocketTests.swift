import CairnClient
import CairnDaemon
import CairnTestSupport
import Foundation
import Logging
import Testing

@Suite("The socket file", .offCooperativePool)
struct SocketTests {
    func mode(_ path: String) -> mode_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & 0o777 : nil
    }

    @Test("Given the default configuration, when the daemon runs, then the socket has mode 0660, and it is gone after shutdown")
    func defaultModeAndRemoval() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        let observed = try await withDaemon(fixture) { socket in mode(socket) }
        #expect(observed == 0o660)
        #expect(!FileManager.default.fileExists(atPath: fixture.socketPath))
    }

    @Test("Given socket_mode 0600 and the process's own group, when the daemon runs, then the socket has that mode and group")
    func configuredModeAndGroup() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        let group = try #require(getgrgid(getegid())).pointee.gr_name.map { String(cString: $0) }
        let observed = try await withDaemon(fixture, configure: { $0.socketMode = 0o600; $0.socketGroup = group }) { socket in
            var info = stat()
            _ = lstat(socket, &info)
            return (info.st_mode & 0o777, info.st_gid)
        }
        #expect(observed.0 == 0o600)
        #expect(observed.1 == getegid())
    }

    @Test("Given a socket file left by a crashed daemon, when the daemon starts, then it replaces it and serves")
    func staleSocketReplaced() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try leaveStaleSocket(at: fixture.socketPath)
        #expect(UnixSocket.probe(fixture.socketPath) == .refused)
        let healthy = try await withDaemon(fixture) { socket in await isHealthy(socket) }
        #expect(healthy)
    }

    @Test("Given a daemon serving the socket, when a second one starts on the same path, then it refuses with socket_in_use and the first keeps serving")
    func liveSocketNotStolen() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try await withDaemon(fixture) { socket in
            #expect {
                _ = try buildDaemon(configuration: fixture.configuration(), logger: Logger(label: "second"))
            } throws: { ($0 as? DaemonError)?.code == .socketInUse }
            #expect(await isHealthy(socket))
        }
    }

    @Test("Given a regular file at the socket path, when the daemon starts, then it refuses and leaves the file")
    func regularFileNotRemoved() throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try Data("keep".utf8).write(to: URL(fileURLWithPath: fixture.socketPath))
        #expect {
            _ = try buildDaemon(configuration: fixture.configuration(), logger: Logger(label: "test"))
        } throws: { ($0 as? DaemonError)?.code == .socketInUse }
        #expect(FileManager.default.contents(atPath: fixture.socketPath) == Data("keep".utf8))
    }

    @Test("Given a listener that never accepts and whose queue is full (a hung cairnd), when the client calls it, then the call fails as unreachable, naming the full queue, instead of waiting forever; the probe counts the socket as served")
    func fullQueueRefusedInTime() throws {
        let (path, listener) = try listening(as: "hung.sock")
        defer { listener.close() }
        var queued: [Int32] = []
        defer { queued.forEach { close($0) } }
        // Connections that nobody accepts fill the queue until a connect waits out its timeout.
        while queued.count < 64, case .success(let fd) = UnixSocket.connect(path, timeout: 0.2) { queued.append(fd) }
        #expect(queued.count < 64, "the queue never filled")
        #expect(UnixSocket.probe(path) == .accepting)
        #expect {
            _ = try UnixHTTPClient(socketPath: path, timeout: 1).send(method: "GET", path: "/v1/health")
        } throws: { error in
            guard let error = error as? ClientError else { return false }
            return error.code == .unreachable && error.message.contains("did not take the connection within 1 s")
        }
    }
}

extension SocketTests {
    @Test("Given a cairnd that takes the request but does not answer in time (a rollback behind a long sync), when the client calls it, then the call fails as no_answer saying it may still act on it, not as unreachable ('is cairnd running?')")
    func takenButUnanswered() throws {
        let (path, listener) = try listening(as: "slow.sock")  // connections queue; nothing is read or answered
        defer { listener.close() }
        #expect {
            _ = try UnixHTTPClient(socketPath: path, timeout: 0.5).send(method: "POST", path: "/v1/rollback", body: [])
        } throws: { error in
            guard let error = error as? ClientError else { return false }
            return error.code == .noAnswer && error.message.contains("did not answer within 0.5 s")
                && error.message.contains("may still be working on it")
        }
    }
}

extension SocketTests {
    @Test("Given a server that answers a byte at a time, each soon after the last but the whole well past the client's timeout, when the client calls it, then the call ends as no_answer at its timeout rather than waiting for the trickle")
    func tricklingAnswer() throws {
        let (path, listener) = try listening(as: "trickle.sock")
        // The server thread ends with the test: shutdown wakes an accept still waiting.
        let finished = DispatchSemaphore(value: 0)
        defer {
            shutdown(listener.fd, Int32(SHUT_RDWR))
            _ = finished.wait(timeout: .now() + 10)
            listener.close()
        }
        // The fault itself, not a synchronisation: a complete answer of 66 bytes, one every
        // 50 ms (3.3 s in all), each within a wait per read of 0.5 s.
        let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\n{\"ok\":true}".utf8)
        let server = Thread {
            defer { finished.signal() }
            let connection = accept(listener.fd, nil, nil)
            guard connection >= 0 else { return }
            defer { close(connection) }
            for byte in answer {
                guard [byte].withUnsafeBytes({ send(connection, $0.baseAddress, 1, Int32(MSG_NOSIGNAL)) }) == 1 else { return }
                usleep(50_000)
            }
        }
        server.start()
        #expect {
            _ = try UnixHTTPClient(socketPath: path, timeout: 0.5).send(method: "GET", path: "/healthz")
        } throws: { error in
            guard let error = error as? ClientError else { return false }
            return error.code == .noAnswer && error.message.contains("did not answer within 0.5 s")
        }
    }
}

/// A Unix socket listening at `name` in a new temporary folder, and its path.
func listening(as name: String) throws -> (path: String, listener: UnixListener) {
    let path = try TemporaryDirectory.make() + "/" + name
    return (path, try UnixListener(path: path))
}

/// Binds a Unix socket at `path` and closes it without unlinking: what a crash leaves behind.
func leaveStaleSocket(at path: String) throws {
    try UnixListener(path: path, listening: false).close()
}
