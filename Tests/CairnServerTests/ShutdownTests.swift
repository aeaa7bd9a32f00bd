import CairnCore
import CairnServer
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
}
