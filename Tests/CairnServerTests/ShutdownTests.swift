import CairnCore
import CairnServer
import CairnTestSupport
import FoundationEssentials
import Logging
import ServiceLifecycle
import Testing

@Suite("Graceful shutdown")
struct ShutdownTests {
    @Test("Given a 32 MB download in flight through a slow reader, when shutdown is triggered, then the download completes intact and the server stops")
    func inFlightDownloadFinishes() async throws {
        let repo = try TestRepository(blobSize: 32 << 20)
        defer { repo.remove() }
        var configuration = ServerConfiguration(repository: repo.root.path)
        configuration.port = 0
        let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let server = try buildServer(configuration: configuration, logger: logger) { continuation.yield($0) }
        let group = ServiceGroup(configuration: .init(services: [server], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            // A small receive buffer and no reading keep the server blocked mid-body (backpressure).
            let socket = try TCPSocket(port: port, receiveBuffer: 64 * 1024)
            defer { socket.close() }
            try socket.write(Array("GET \(repo.blobPath) HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            let first = try await RawHTTP.onThread { try socket.read() }
            #expect(!first.isEmpty)
            await group.triggerGracefulShutdown()
            // The rest arrives even though shutdown has begun; the server then closes the connection.
            let all = try await RawHTTP.onThread { try socket.readToEnd(after: first) }
            let response = try RawHTTP.parse(all, head: false)
            #expect(response.status == 200)
            #expect(response.body.count == repo.blob.count)
            #expect(ContentID(hashing: response.body).hex == repo.blobHex)
            try await tasks.waitForAll()
            // The listener is gone once the server has stopped.
            #expect(throws: TestFailure.self) { _ = try TCPSocket(port: port) }
        }
    }

    /// The shared `withServer` with `idleTimeout` seconds, logging to `capture`.
    static func withServer(_ repo: TestRepository, idleTimeout: Int, capture: LogCapture,
                           _ body: @Sendable (_ port: Int) async throws -> Void) async throws {
        try await CairnServerTests.withServer(repo, logger: Logger(label: "test", factory: { _ in capture }),
                                              configure: { $0.idleTimeoutSeconds = idleTimeout }, body)
    }

    @Test("Given a client that asks for a 32 MB blob and stops reading (idle_timeout 1 s), then the server closes its connection, logged as aborted, rather than hold it and its slot for ever; the stop is not held by it")
    func stalledDownloadIsClosed() async throws {
        let repo = try TestRepository(blobSize: 32 << 20)
        defer { repo.remove() }
        let capture = LogCapture()
        try await Self.withServer(repo, idleTimeout: 1, capture: capture) { port in
            let socket = try TCPSocket(port: port, receiveBuffer: 64 * 1024)
            defer { socket.close() }
            try socket.write(Array("GET \(repo.blobPath) HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            let first = try await RawHTTP.onThread { try socket.read() }
            #expect(!first.isEmpty)
            // The server's write stalls on the full buffers; it gives up once idle_timeout passes.
            try await waitUntil("the server ends the stalled download", seconds: 60) {
                capture.entries.contains { $0.message == "request aborted" && $0.metadata["cairn.http.path"] == repo.blobPath }
            }
            let all = try await RawHTTP.onThread { try socket.readToEnd(after: first) }
            #expect(all.count < repo.blob.count, "\(all.count) bytes")
        }
    }

    @Test("Given an HTTP/1.0 request without keep-alive (ab, a monitor's check), then the server answers and closes the connection, long before idle_timeout")
    func http10Closes() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        try await Self.withServer(repo, idleTimeout: 600, capture: LogCapture()) { port in
            let socket = try TCPSocket(port: port)
            defer { socket.close() }
            try socket.write(Array("GET /channels/stable/manifest.json HTTP/1.0\r\n\r\n".utf8))
            // Read to the end of the stream: it ends when the server closes (the socket's own
            // 30 s receive timeout fails the read otherwise).
            let all = try await RawHTTP.onThread { try socket.readToEnd() }
            let response = try RawHTTP.parse(all, head: false)
            #expect(response.status == 200 && response.body == repo.manifest)
        }
    }
}
