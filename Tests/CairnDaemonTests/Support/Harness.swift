import CairnClient
import CairnDaemon
import CairnTestSupport
import Foundation
import Logging
import ServiceLifecycle

/// One request over the real Unix socket.
func request(_ socket: String, _ method: String, _ path: String, json: String? = nil, body: [UInt8]? = nil,
             contentType: String? = "application/json") async throws -> UnixHTTPClient.Response {
    let bytes = body ?? json.map { Array($0.utf8) }
    return try await onThread { try UnixHTTPClient(socketPath: socket, timeout: 30).send(method: method, path: path, body: bytes, contentType: contentType) }
}

/// The body of a response as JSON.
func object(_ response: UnixHTTPClient.Response) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] ?? [:]
}

func decode<T: Decodable>(_ type: T.Type, _ response: UnixHTTPClient.Response) throws -> T {
    try JSONDecoder().decode(type, from: Data(response.body))
}

/// Whether /healthz answers 200 on `socket`.
func isHealthy(_ socket: String) async -> Bool {
    (try? await request(socket, "GET", "/healthz"))?.status == 200
}

/// Runs the daemon in process on the fixture's socket until `body` returns, then shuts it down
/// gracefully and checks that it stopped.
func withDaemon<T: Sendable>(_ fixture: DataDirectoryFixture, hooks: DaemonHooks = DaemonHooks(),
                             configure: (inout DaemonConfiguration) -> Void = { _ in },
                             _ body: @Sendable (String) async throws -> T) async throws -> T {
    var configuration = fixture.configuration()
    configure(&configuration)
    var logger = Logger(label: "cairnd-test")
    logger.logLevel = .warning
    let service = try buildDaemon(configuration: configuration, hooks: hooks, logger: logger)
    let group = ServiceGroup(configuration: .init(services: [service], logger: logger))
    let socket = configuration.socketPath
    return try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        let result: Result<T, any Error>
        do {
            try await waitUntil("the daemon answers /healthz") { await isHealthy(socket) }
            result = .success(try await body(socket))
        } catch {
            result = .failure(error)
        }
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
        return try result.get()
    }
}
