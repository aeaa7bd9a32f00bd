import CairnHTTP
import CairnSearch
import Foundation
public import Hummingbird
import HummingbirdCore
public import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import UnixSignals

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
    let root = try RepositoryRoot(path: configuration.repository, logger: logger)
    let search = try configuration.onlineSearch ? makeOnlineSearch(root: root, configuration: configuration, logger: logger) : nil
    let responder = RepositoryResponder(root: root, documents: DocumentCache(), fileIO: FileIO(), metrics: ServerMetrics(),
                                        search: search)
    let idleTimeout = TimeAmount.seconds(Int64(configuration.idleTimeoutSeconds))
    // A request must arrive whole, and a download keep moving, within idle_timeout: Hummingbird's
    // own idle timer stops while an answer is being written, so a client that stops reading a
    // blob held its connection for ever. The deadline's close passes no drain (it comes first).
    // A download is cut after 5 x idle_timeout without a 128 KiB chunk written: 5 minutes by
    // default, so links down to about 0.45 KiB/s keep theirs (a device gives up below 1 KiB/s
    // for stall_timeout itself), while a client that stopped reading frees its slot.
    let http1 = HTTP1Channel.Configuration(
        additionalChannelHandlers: [HTTP10CloseInstaller(), RequestDeadlineHandler(limit: idleTimeout, stallLimit: .seconds(Int64(min(configuration.idleTimeoutSeconds, 1_000_000_000)) * 5)),
                                    DrainBeforeCloseHandler(limit: idleTimeout)],
        idleTimeout: idleTimeout)
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

/// Online search's parts: the cache folder (checked now, so a bad one stops the start), the
/// trusted keys, and the worker pool.
private func makeOnlineSearch(root: RepositoryRoot, configuration: ServerConfiguration,
                              logger: Logger) throws(ServerError) -> OnlineSearch {
    let folder = configuration.searchCache ?? (NSTemporaryDirectory() as NSString)
        .appendingPathComponent("cairn-server-search-\(getuid())")
    let cache = try VersionCache(repository: root.path, folder: folder, trustedKeyFiles: configuration.searchTrustedKeys,
                                 trustedRootFile: configuration.searchTrustedRoot, logger: logger)
    if configuration.searchTrustedKeys.isEmpty && configuration.searchTrustedRoot == nil {
        logger.warning("online search trusts the keys stored under the repository's keys/ (integrity, not authorship); set search_trusted_root or search_trusted_key to pin one")
    }
    logger.info("online search is on", metadata: ["cairn.search.cache": "\(folder)"])
    let pool = SearchPool(threads: configuration.maxConcurrentSearches, queueLimit: configuration.maxQueuedSearches)
    return OnlineSearch(root: root, cache: cache, endpoint: SearchEndpoint(pool: pool, maxBodyBytes: 64 * 1024, logger: logger),
                        allowOrigins: configuration.searchAllowOrigins, logger: logger)
}

/// Builds the server and runs it until SIGTERM or SIGINT, then shuts down gracefully: the
/// listener closes at once and requests in flight (downloads included) are finished first, for
/// up to 30 s (half the shipped unit's `TimeoutStopSec`); then they are cut, and devices
/// resume them.
/// - Throws: `ServerError` from `buildServer`, `.listenFailed` when it cannot listen, or what the
///   server throws while running.
public func runServer(
    configuration: ServerConfiguration,
    logger: Logger,
    onRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) async throws {
    let listening = Mutex(false)
    let application = try buildServer(configuration: configuration, logger: logger) { port in
        listening.withLock { $0 = true }
        await onRunning(port)
    }
    var group = ServiceGroupConfiguration(services: [application], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
    // Downloads in flight are finished first, for so long: a large one over a slow link would
    // otherwise hold the stop until the service manager's SIGKILL cut every other download too
    // (a device resumes a cut download where it stopped).
    group.maximumGracefulShutdownDuration = .seconds(30)
    let service = ServiceGroup(configuration: group)
    do {
        try await service.run()
    } catch where !listening.withLock({ $0 }) {
        let reason = (error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(error)"
        throw ServerError(.listenFailed, "cannot listen on \(configuration.host):\(configuration.port) (\(reason)); "
                          + "stop what uses that port or choose another --port or --host")
    }
}
