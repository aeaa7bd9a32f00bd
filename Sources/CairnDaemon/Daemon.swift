public import CairnSearch
import CairnHTTP
import Foundation
import Hummingbird
import HummingbirdCore
public import Logging
import NIOCore
public import ServiceLifecycle

/// What the sync side hands the socket server: the shared holder it installs new versions
/// into, the sync state, and the "sync now" trigger. All optional: without them cairnd serves
/// what `DIR/current` holds, reads `DIR/state.json`, and answers `POST /v1/sync` with 503.
public struct DaemonHooks: Sendable {
    /// Shared with CairnSync, which calls `install(_:)` after each verified swap. When it is
    /// empty at start, the daemon loads `DIR/current` (or `DIR/previous`) into it.
    public var holder: IndexHolder
    public var status: (any SyncStatusProvider)?
    /// "Sync now": returns, per channel, the number of the attempt that answers the request.
    public var requestSync: (@Sendable () async -> [String: Int])?
    /// The data directory's rollback and export (CairnSync's `Syncer`); nil answers 503.
    public var maintenance: (any DeviceMaintenance)?
    /// Told `READY=1` once the socket answers (systemd `Type=notify`); inert without `NOTIFY_SOCKET`.
    public var notifier: SystemdNotifier
    /// What `GET /metrics` exposes; nil answers 404.
    public var metrics: DaemonMetrics?
    /// The further channels (`[channel NAME]`), searched beside the daemon's own.
    public var channels: [ChannelHooks]
    /// The caller already loaded what it could into `holder` (`Device` does, keeping the rows
    /// for its syncer): an empty holder then means nothing loadable, not "load it".
    public var holderLoaded = false
    /// The threads searches run on; nil makes them from the configuration. `Device` passes its
    /// own, which the watchdog's liveness check reads.
    public var searchPool: SearchPool?

    public init(holder: IndexHolder = IndexHolder(), status: (any SyncStatusProvider)? = nil,
                requestSync: (@Sendable () async -> [String: Int])? = nil, maintenance: (any DeviceMaintenance)? = nil,
                notifier: SystemdNotifier = SystemdNotifier(), metrics: DaemonMetrics? = nil, channels: [ChannelHooks] = []) {
        self.holder = holder
        self.status = status
        self.requestSync = requestSync
        self.maintenance = maintenance
        self.notifier = notifier
        self.metrics = metrics
        self.channels = channels
    }
}

/// One further channel as the socket API sees it: its installed version, sync state and metrics.
public struct ChannelHooks: Sendable {
    public var name: String
    public var holder: IndexHolder
    public var status: any SyncStatusProvider
    public var metrics: DaemonMetrics?
    /// Its rollback and export.
    public var maintenance: (any DeviceMaintenance)?

    public init(name: String, holder: IndexHolder, status: any SyncStatusProvider, metrics: DaemonMetrics? = nil,
                maintenance: (any DeviceMaintenance)? = nil) {
        self.name = name
        self.holder = holder
        self.status = status
        self.metrics = metrics
        self.maintenance = maintenance
    }
}

/// Builds the socket server: checks the socket path (a live socket is never stolen: throws
/// `socket_in_use`), loads the installed version if the holder is empty and `holderLoaded` is
/// not set (none installed is fine: search answers 503 `no_index`), and returns the service to run in a `ServiceGroup`.
/// Searches run on `max_concurrent_queries` threads of their own (`SearchPool`), off the event
/// loops. (OpenBLAS runs one thread per call, as CairnEmbedding sets it: concurrent queries are
/// the parallelism; with a thread per core, 8 clients got 90 dense queries/s instead of 240.)
/// On graceful shutdown in-flight requests finish and the socket file is removed.
public func buildDaemon(configuration: DaemonConfiguration, hooks: DaemonHooks = DaemonHooks(),
                        logger: Logger) throws(DaemonError) -> some Service {
    let socket = try SocketFile(path: configuration.socketPath, mode: configuration.socketMode,
                                group: configuration.socketGroup)
    if hooks.holder.current == nil && !hooks.holderLoaded {
        do {
            hooks.holder.install(try VersionLoader.loadNewest(dataDirectory: configuration.dataDirectory,
                                                                configuration: configuration.ranking, logger: logger))
        } catch {
            logger.warning("serving no index until a version is installed", metadata: ["cairn.error": "\(error)"])
        }
    }
    let api = DaemonAPI(
        holder: hooks.holder, status: hooks.status ?? StateFileStatusProvider(dataDirectory: configuration.dataDirectory),
        requestSync: hooks.requestSync, maintenance: hooks.maintenance, metrics: hooks.metrics,
        channel: configuration.channel, channels: hooks.channels,
        endpoint: SearchEndpoint(
            pool: hooks.searchPool ?? SearchPool(threads: configuration.maxConcurrentQueries, queueLimit: configuration.maxQueuedQueries),
            maxBodyBytes: configuration.maxBodyBytes, logger: logger),
        dataDirectory: configuration.dataDirectory, callers: CallerDirectory(operatorGroup: configuration.operatorGroup), logger: logger)
    if configuration.operatorGroup != nil {
        // Not awaited: start-up does not wait on the group directory.
        Task { [callers = api.callers, socketGroup = socket.groupID ?? getegid()] in
            await callers.checkAtStart(socketGroup: socketGroup, logger: logger)
        }
    }
    // HEAD on every GET route (curl -I, monitors): the GET's status and headers, no body.
    let router = Router(context: DaemonRequestContext.self, options: .autoGenerateHeadEndpoints)
    api.addRoutes(to: router)
    let idle = TimeAmount.nanoseconds(Int64(configuration.idleTimeout * 1e9))
    let app = Application(
        router: router,
        server: .http1(configuration: .init(additionalChannelHandlers: [HTTP10CloseInstaller(), RequestDeadlineHandler(limit: idle)], idleTimeout: idle)),
        configuration: ApplicationConfiguration(
            address: .unixDomainSocket(path: configuration.socketPath), serverName: "cairnd",
            availableConnectionsDelegate: MaximumAvailableConnections(configuration.maxConnections)),
        onServerRunning: { [holder = hooks.holder, notifier = hooks.notifier] _ in
            socket.markListening()
            if let problem = socket.didBind() { logger.error("\(problem)") }
            logger.info("answering queries", metadata: ["cairn.socket.path": "\(configuration.socketPath)"])
            // The installed version (if any) is loaded before the server starts: ready means answering.
            let serving = holder.current.map { "answering queries; serving version \($0.version)" }
                ?? holder.unservableReason.map { "not answering queries: \($0)" } ?? "answering queries; no version installed yet"
            notifier.notify(["READY=1", "STATUS=" + serving])
        },
        logger: logger)
    return DaemonService(app: app, socket: socket)
}

/// The socket server as a `Service`: runs the HTTP application until graceful shutdown, then
/// removes its socket file.
struct DaemonService<App: Service>: Service {
    let app: App
    let socket: SocketFile

    /// A failure before the socket listens (bind refused) becomes a one-line `socket_setup`
    /// error naming the path; later failures pass through as they are.
    func run() async throws {
        defer { socket.remove() }
        do {
            try await app.run()
        } catch where !socket.isListening {
            let reason = (error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(error)"
            throw DaemonError(.socketSetup, "cannot listen on the socket \(socket.path) (\(reason)); choose another --socket")
        }
    }
}
