import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceLifecycle

/// Builds the HTTP server for a repository folder (protocol/repository.md), read-only.
///
/// Refuses to build if the folder is missing or holds a private signing key anywhere in it.
/// The returned application is a `Service`: run it in a `ServiceGroup` (or use `runServer`).
/// - Parameters:
///   - configuration: where to listen, what to serve, limits.
///   - logger: used for one info line per request (`cairn.http.*` metadata) and server events.
///   - onRunning: called once listening, with the bound port (useful with port 0).
/// - Throws: `ServerError` (`.repositoryInvalid`, `.privateKeyUnderRoot`).
public func buildServer(
    configuration: ServerConfiguration,
    logger: Logger,
    onRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) throws(ServerError) -> some ApplicationProtocol {
    let root = try RepositoryRoot(path: configuration.repository)
    let responder = RepositoryResponder(root: root, documents: DocumentCache(), fileIO: FileIO(), metrics: ServerMetrics())
    let idleTimeout = TimeAmount.seconds(Int64(configuration.idleTimeoutSeconds))
    let http1 = HTTP1Channel.Configuration(
        additionalChannelHandlers: [DrainBeforeCloseHandler(limit: idleTimeout)], idleTimeout: idleTimeout)
    return Application(
        responder: responder,
        server: .http1(configuration: http1),
        configuration: ApplicationConfiguration(
            address: .hostname(configuration.host, port: configuration.port),
            serverName: "cairn-server",
            availableConnectionsDelegate: MaximumAvailableConnections(configuration.maxConnections, logger: logger)
        ),
        onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? configuration.port) },
        logger: logger
    )
}

/// Builds the server and runs it until SIGTERM or SIGINT, then shuts down gracefully: the
/// listener closes at once and requests in flight (downloads included) are finished first.
/// - Throws: `ServerError` from `buildServer`, or what the server throws while running.
public func runServer(
    configuration: ServerConfiguration,
    logger: Logger,
    onRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) async throws {
    let application = try buildServer(configuration: configuration, logger: logger, onRunning: onRunning)
    let group = ServiceGroup(configuration: .init(
        services: [application], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
    try await group.run()
}
