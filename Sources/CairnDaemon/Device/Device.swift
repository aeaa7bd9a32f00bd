import CairnCore
import CairnStore
import CairnIndex
import CairnSearch
import CairnSync
import CairnThreads
import Foundation
import NIOPosix
public import Logging
public import ServiceLifecycle

/// All of cairnd: the data directory (locked for this process, recovered at start-up), the
/// sync loop, and the socket server, wired so that every verified swap reaches the query path.
public struct Device: Sendable {
    /// The services to run in one `ServiceGroup`: the socket server, and the sync loop when
    /// sources are configured.
    public let services: [any Service]
    /// "Sync now" (the socket's `POST /v1/sync`, SIGHUP); nil without sources. Returns, per
    /// channel, the number of the attempt that answers it.
    public let requestSync: (@Sendable () -> [String: Int])?

    /// The folders under `DIR/channels` of channels the configuration no longer names, with the
    /// bytes each holds (a channel dropped from cairnd.conf leaves its versions, model and spare,
    /// which no budget counts), by name.
    static func unfollowedChannels(in dataDirectory: String, followed: [String]) -> [(name: String, bytes: Int64)] {
        let folder = dataDirectory + "/channels"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return names.filter { !followed.contains($0) }.sorted().map { ($0, DiskUsage.bytes(under: folder + "/" + $0)) }
    }

    /// Locks and recovers the data directory, loads the trusted keys and builds the services.
    /// Rollback and export work with or without sources.
    /// Throws `bad_configuration` (exit 2) for unreadable keys, `data_dir_locked` when another
    /// cairnd holds the directory, `data_dir_unusable` when it cannot be created or written,
    /// `socket_in_use` for a live socket, `socket_setup` when its folder is missing or closed.
    public static func build(configuration: DaemonConfiguration, logger: Logger) throws(DaemonError) -> Device {
        // The socket's folder first: a start that cannot answer leaves no data directory behind.
        try SocketFile.checkFolder(of: configuration.socketPath)
        // The channel goes into every URL and the data directory's records (as a section's does).
        guard Manifest.isValidChannelName(configuration.channel) else {
            throw DaemonError(.badConfiguration, "channel \"\(configuration.channel)\" is not a channel name: [a-z0-9][a-z0-9._-]{0,63}")
        }
        try checkSourceSections(configuration)
        let registry = MetricsRegistry()
        let notifier = SystemdNotifier()
        let extraConfigurations = configuration.extraChannels.map { (settings: $0, configuration: configuration.configuration(for: $0)) }
        // Every channel's data directory, so that one short of disk can take the others' spares.
        let directories = [configuration.dataDirectory] + extraConfigurations.map(\.configuration.dataDirectory)
        func others(_ directory: String) -> [String] { directories.filter { $0 != directory } }
        // Before anything is mapped: what a failed read stopped the last run on, then where the
        // next one is recorded.
        let marker = configuration.dataDirectory + "/" + DataDirectoryLayout.failedReadFile
        FailedRead.resolve(marker: marker, dataDirectories: directories, logger: logger)
        MappedFiles.recordFailedReads(in: marker)
        let main = try makeChannel(configuration, registry: registry, notifier: notifier, statusPrefix: "",
                                   otherChannels: others(configuration.dataDirectory), logger: logger)
        var extras: [ChannelParts] = []
        for (settings, channel) in extraConfigurations {
            guard Manifest.isValidChannelName(settings.name), settings.name != configuration.channel,
                  !extras.contains(where: { $0.name == settings.name }) else {
                throw DaemonError(.badConfiguration, "[channel \(settings.name)]: a channel name is [a-z0-9][a-z0-9._-]{0,63}, once, and not the daemon's own channel")
            }
            guard !settings.sources.isEmpty else {
                throw DaemonError(.badConfiguration, "[channel \(settings.name)] has no source")
            }
            extras.append(try makeChannel(channel, registry: registry, notifier: notifier, statusPrefix: "[\(settings.name)] ",
                                          otherChannels: others(channel.dataDirectory), logger: logger))
        }
        // Once per source: channels share sources and their access settings.
        var said = Set<String>()
        for parts in [main] + extras {
            for line in unusedProxyCABundles(parts.syncer.configuration) where said.insert(line).inserted { logger.warning("\(line)") }
        }
        for (name, bytes) in unfollowedChannels(in: configuration.dataDirectory, followed: extras.map(\.name)) {
            logger.warning("\(configuration.dataDirectory)/channels/\(name) (\(bytes) bytes) is a channel no longer followed: nothing reads, counts or removes it; delete it to free the space, or follow the channel again")
        }
        let followed = ([main] + extras).compactMap { parts in parts.service.map { (name: parts.name, service: $0) } }
        let services = followed.map(\.service)
        let syncRequest: (@Sendable () -> [String: Int])? = followed.isEmpty ? nil : { @Sendable in
            Dictionary(uniqueKeysWithValues: followed.map { ($0.name, $0.service.requestSync()) })
        }
        let requestSync: (@Sendable () async -> [String: Int])? = syncRequest.map { request in { @Sendable in request() } }
        var hooks = DaemonHooks(holder: main.holder, status: main.status, requestSync: requestSync,
                                maintenance: main.syncer, metrics: main.metrics,
                                channels: extras.map { ChannelHooks(name: $0.name, holder: $0.holder, status: $0.status,
                                                                    metrics: $0.metrics, maintenance: $0.syncer) })
        // makeChannel loaded the installed version (or the newest loadable one): not twice.
        hooks.holderLoaded = true
        let searches = SearchPool(threads: configuration.maxConcurrentQueries, queueLimit: configuration.maxQueuedQueries)
        hooks.searchPool = searches
        let daemon = try buildDaemon(configuration: configuration, hooks: hooks, logger: logger)
        if services.isEmpty {
            logger.notice("no sources configured: serving what is installed, never syncing")
            // Else a query says "wait for the first sync", which never comes.
            main.holder.explainNothingInstalled("no knowledge-base version is installed, and this cairnd has no source to sync from; " + Self.noSourceRemedy)
        }
        // Hummingbird's default group serves the socket (buildDaemon passes none of its own).
        let liveness = LivenessProbe(loops: MultiThreadedEventLoopGroup.singleton, searchLoad: { searches.load })
        return Device(services: [daemon] + services.map { $0 as any Service }
                          + WatchdogService.ifEnabled(notifier, probe: liveness, logger: logger),
                      requestSync: syncRequest)
    }

    /// One channel's parts: its data directory (locked and recovered), the version it has
    /// installed (loaded), its syncer, status and metrics, and its poll loop when it has sources.
    struct ChannelParts {
        let name: String
        let holder: IndexHolder
        let syncer: Syncer
        let status: SyncStateStatusProvider
        let metrics: DaemonMetrics
        let service: SyncService?
    }

    /// What a cairnd without sources tells a caller to do.
    static let noSourceRemedy = "add a source (a URL, or file:///media/usb/repo for a stick) to its configuration, or start it with --source URL, and restart it"

    static func makeChannel(_ configuration: DaemonConfiguration, registry: MetricsRegistry, notifier: SystemdNotifier,
                            statusPrefix: String, otherChannels: [String] = [], logger: Logger) throws(DaemonError) -> ChannelParts {
        let sync = try syncConfiguration(configuration, otherChannels: otherChannels)
        let directory: DataDirectory
        do {
            directory = try DataDirectory(path: configuration.dataDirectory, logger: logger)
            // Before `recover`: they tell an installed manifest a newer cairnd wrote from a damaged one.
            directory.knowManifestSigners(of: sync)
            if let recovered = try directory.recover() {
                logger.info("recovered the installed version", metadata: ["cairn.channel": "\(configuration.channel)",
                                                                          "cairn.version": "\(recovered.version)"])
            }
        } catch {
            throw DaemonError(error.code == .locked ? .dataDirectoryLocked : .dataDirectoryUnusable, error.message, cause: error)
        }
        let holder = IndexHolder()
        // The installed version, opened from its rows files (memory-mapped: no row is read),
        // which the syncer checks the next delta against before applying it to the previous
        // version's file in place. If this fails, the newest loadable version is opened (falling
        // back to previous).
        var installedRows: IndexContents?
        let installed = directory.installed()
        var failure: DaemonError?
        if installed != nil {
            do throws(DaemonError) {
                let version = try VersionLoader.load(dataDirectory: configuration.dataDirectory, configuration: configuration.ranking,
                                                     logger: logger)
                holder.install(version)
                installedRows = version.index.contents
            } catch {
                failure = error
            }
        }
        let retried = sync.sources.isEmpty ? "cairnd opens it again when restarted" : "it is opened again at each sync"
        // `recover` keeps the links while `current` does not read in a read-only data directory,
        // when its manifest cannot be read now (EIO, EACCES), or when the links cannot be
        // changed: `previous` serves meanwhile if it opens.
        let newer = installed == nil ? directory.currentWrittenByNewerCairnd() : nil
        let unreadNow = installed == nil ? directory.currentCannotBeReadNow() : nil
        // (Outside a read-only directory, only a previous whose manifest reads: with both
        // damaged, `recover` serves neither.)
        if installed == nil, directory.readOnly ? directory.previousVersion() != nil : directory.previous() != nil,
           servePrevious(configuration, holder: holder, logger: logger) == nil {
            logger.error(directory.readOnly
                ? "serving the previous version: the current one does not read, and the read-only data directory keeps its links"
                : "serving the previous version: the current one does not read, and its links are kept\(unreadNow.map { " (\($0.message))" } ?? "")")
        } else if installed == nil, let newer {
            // A newer cairnd's version with none before it to serve (`recover` kept it).
            holder.markUnservable(newer.message)
        } else if installed == nil, let unreadNow {
            holder.markUnservable("the installed version cannot be read now (\(unreadNow.message)); it is kept; \(retried)")
        }
        if let installed, let failure, failure.isEnvironmental {
            // Not the version's fault (a full disk, SQLite busy or out of memory): every link
            // stays, `previous` answers meanwhile if it opens, and `current` is opened again.
            logger.error("the installed version cannot be opened now; it is kept; \(retried)",
                         metadata: ["cairn.version": "\(installed.version)", "cairn.error": "\(failure)"])
            if servePrevious(configuration, holder: holder, logger: logger) != nil {
                holder.markUnservable("version \(installed.version) is installed but cannot be opened now (\(failure.message)); \(retried)")
            }
        } else if let installed, let failure {
            openAfterFailure(installed: installed, failure: failure, directory: directory, holder: holder, configuration: configuration,
                             hasSources: !sync.sources.isEmpty, retried: retried, logger: logger)
        }
        let (dataDirectory, ranking) = (configuration.dataDirectory, configuration.ranking)
        let preload = ModelPreload()
        let syncer = Syncer(configuration: sync, directory: directory, logger: logger, installedRows: installedRows,
                            onInstalled: { installed, contents throws(SyncError) in
            do throws(DaemonError) {
                // Opening (reading every vector when the install did not hand its rows over) runs
                // off the threads that answer queries.
                let serving = holder.current
                let (version, model) = try await BackgroundWork.run { () throws(DaemonError) in
                    let preloaded = preload.take(folder: installed.modelDirectory.flatMap(VersionLoader.resolve))
                    let version = try VersionLoader.load(dataDirectory: dataDirectory, reusing: serving, contents: contents,
                                                         configuration: ranking, preloaded: preloaded, logger: logger)
                    // Where its model came from: the serving version's, loaded while the version
                    // installed, loaded after it, or none (lexical only).
                    let model = version.embedder.map { embedder in
                        embedder === serving?.embedder ? "reused" : embedder === preloaded ? "preloaded" : "loaded"
                    } ?? "none"
                    return (version, model)
                }
                holder.install(version)
                logger.info("now serving", metadata: ["cairn.channel": "\(sync.channel)", "cairn.version": "\(installed.version)",
                                                      "cairn.model": "\(model)"])
            } catch {
                if error.isEnvironmental {
                    // Kept installed, opened again at the next attempt (`Syncer.CannotOpenNow`).
                    if holder.current == nil {
                        holder.markUnservable("version \(installed.version) is installed but cannot be opened now (\(error.message)); it is opened again at each sync")
                    }
                    throw SyncError(.installFailed, "version \(installed.version) is installed but cannot be opened now: \(error.message); it is kept and opened again at the next attempt",
                                    cause: Syncer.CannotOpenNow())
                }
                logger.error("installed version cannot be served; keeping the previous one",
                             metadata: ["cairn.version": "\(installed.version)", "cairn.error": "\(error)"])
                throw SyncError(.installFailed, "version \(installed.version) cannot be served: \(error.message)", cause: error)
            }
        }, onModel: { folder in
            // The serving version's model is reused; another one loads while the index is built.
            guard let resolved = VersionLoader.resolve(folder),
                  holder.current?.modelDirectory != resolved || holder.current?.embedder?.isLoaded(from: resolved) != true else { return }
            preload.start(folder: resolved)
        }, servedVersion: { holder.current?.index.meta.version })
        let status = SyncStateStatusProvider(directory: directory, configuration: sync, trust: syncer.trust, progress: syncer.progress,
                                             spare: { syncer.spareState(of: $0) })
        let metrics = DaemonMetrics(channel: configuration.channel, registry: registry)
        let service = sync.sources.isEmpty ? nil : SyncService(
            syncer: syncer, configuration: sync, logger: logger, onStatus: { notifier.status(statusPrefix + $0) },
            onAttempt: { metrics.recordSync(outcome: $0, path: $1, bytes: $2) })
        return ChannelParts(name: configuration.channel, holder: holder, syncer: syncer, status: status, metrics: metrics,
                            service: service)
    }

    /// Serves the version `previous` names; nil when it does, else why it could not be opened.
    static func servePrevious(_ configuration: DaemonConfiguration, holder: IndexHolder, logger: Logger) -> DaemonError? {
        do throws(DaemonError) {
            holder.install(try VersionLoader.load(dataDirectory: configuration.dataDirectory, link: DataDirectoryLayout.previousLink,
                                                  configuration: configuration.ranking, logger: logger))
            return nil
        } catch {
            return error
        }
    }

    /// `current` did not open because of its own bytes (`failure`): `previous` is served instead
    /// and the links are made to say so (else the next install would make the served version
    /// unreferenced and remove it); the version that does not open goes, and a sync installs it
    /// again. `previous` that cannot be opened now (a full disk) still becomes `current`, opened
    /// again at the next sync. With neither, `current` is dropped so that the first sync installs
    /// that version again instead of finding it up to date (without a source to install it from,
    /// the folder is left as it is).
    static func openAfterFailure(installed: InstalledVersion, failure: DaemonError, directory: DataDirectory, holder: IndexHolder,
                                 configuration: DaemonConfiguration, hasSources: Bool, retried: String, logger: Logger) {
        logger.error("the installed version is unusable; trying the previous one",
                     metadata: ["cairn.version": "\(installed.version)", "cairn.error": "\(failure)"])
        var previousKept = true
        if let error = servePrevious(configuration, holder: holder, logger: logger) {
            previousKept = error.isEnvironmental
            if previousKept {
                logger.error("the previous version cannot be opened now; it is kept; \(retried)", metadata: ["cairn.error": "\(error)"])
                holder.markUnservable("the installed version cannot be served and the one before it cannot be opened now (\(error.message)); \(retried)")
            }
        }
        do {
            if previousKept, let back = try directory.fallBackToPrevious() {
                try directory.recover()
                logger.warning("current now points at the previous version", metadata: ["cairn.version": "\(back.version)"])
            } else if !previousKept, hasSources {
                try directory.forgetCurrent()
                try directory.recover()
                logger.error("the installed version cannot be served; a sync installs it again",
                             metadata: ["cairn.version": "\(installed.version)"])
            }
        } catch {
            logger.error("the data directory's links cannot be changed: \(error.message)")
        }
    }

    /// Every `[source URL]` section must name a source of the daemon's channel or of one of its
    /// `[channel]` sections (each channel's sync configuration carries all the sections; a
    /// channel uses those of its own sources).
    static func checkSourceSections(_ configuration: DaemonConfiguration) throws(DaemonError) {
        let sources = configuration.sources + configuration.extraChannels.flatMap(\.sources)
        for source in configuration.sourceAccess.keys.sorted()
        where !sources.contains(where: { SourceAccess.base(of: $0) == source }) {
            throw DaemonError(.badConfiguration, "[source \(source)] names no configured source; sources are \(sources.joined(separator: ", "))")
        }
    }

    /// A line for each source whose `proxy_ca_bundle` its proxy does not use: it verifies an
    /// `https://` proxy only, and an operator who left it beside a plain-HTTP or SOCKS proxy
    /// (meaning TLS to the proxy, or after changing proxies) would otherwise hear nothing. A
    /// proxy the environment names (`proxy` unset) is libcurl's to judge.
    static func unusedProxyCABundles(_ sync: SyncConfiguration) -> [String] {
        sync.sources.compactMap { source in
            let access = sync.access(for: source)
            // No scheme is libcurl's http.
            guard let bundle = access.proxyCABundle, let proxy = access.proxy, !proxy.isEmpty,
                  case let scheme = proxy.range(of: "://").map({ String(proxy[..<$0.lowerBound]) }) ?? "http",
                  scheme.lowercased() != "https" else { return nil }
            return "proxy_ca_bundle \(bundle) is not used for \(source): its proxy is \(scheme)://, which carries no TLS to the proxy; only an https:// proxy's certificate is checked against it"
        }
    }

    static func syncConfiguration(_ configuration: DaemonConfiguration, otherChannels: [String] = []) throws(DaemonError) -> SyncConfiguration {
        var keys: [PublicKey] = []
        for path in configuration.trustedKeys {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw DaemonError(.badConfiguration, "cannot read trusted key \(path)")
            }
            do {
                keys.append(try PublicKey(fileText: text))
            } catch {
                throw DaemonError(.badConfiguration, "trusted key \(path): \(error.message)")
            }
        }
        var root: [UInt8]?
        if let path = configuration.trustedRoot {
            guard keys.isEmpty else {
                throw DaemonError(.badConfiguration, "trusted_root and trusted_key are both set; pin a root or keys, not both")
            }
            let data: [UInt8]
            do { data = try FileSystem.read(path) } catch {
                throw DaemonError(.badConfiguration, "cannot read trusted root \(path): \(error.reason)")
            }
            do { _ = try TrustChain(pinned: data) } catch {
                throw DaemonError(.badConfiguration, "trusted root \(path): \(error.code): \(error.message)")
            }
            root = data
        }
        if !configuration.sources.isEmpty && keys.isEmpty && root == nil {
            throw DaemonError(.badConfiguration, "sources are configured but no trusted_key or trusted_root: nothing could be installed")
        }
        guard configuration.backoffMinimum <= configuration.backoffMaximum else {
            throw DaemonError(.badConfiguration, "backoff_min must not exceed backoff_max")
        }
        func duration(_ seconds: Double) -> Duration { .milliseconds(Int64(seconds * 1000)) }
        var transfer = TransferLimits()
        transfer.bandwidthCap = configuration.bandwidthCap
        transfer.lowSpeedSeconds = Int(configuration.stallTimeout.rounded(.up))
        transfer.slowSourceBytesPerSecond = configuration.slowSourceRate
        transfer.slowSourceSeconds = Int(configuration.slowSourceWindow.rounded(.up))
        var sync = SyncConfiguration(sources: configuration.sources, channel: configuration.channel, trustedKeys: keys,
                                     dataDirectory: configuration.dataDirectory,
                                     pollInterval: duration(configuration.pollInterval),
                                     backoffMinimum: duration(configuration.backoffMinimum),
                                     backoffMaximum: duration(configuration.backoffMaximum), transfer: transfer)
        sync.requestInterval = duration(configuration.syncRequestInterval)
        sync.trustedRoot = root
        sync.defaultAccess = configuration.defaultSourceAccess
        sync.access = configuration.sourceAccess
        sync.expiredUpdates = ExpiredUpdatePolicy(rawValue: configuration.expiredUpdates) ?? .install
        sync.maxDiskBytes = configuration.maxDiskBytes
        sync.spareIndexMinimumBytes = configuration.spareIndexMinimumBytes
        sync.directInstallMinimumBytes = configuration.directInstallMinimumBytes
        sync.ranking = configuration.ranking
        sync.otherChannelDirectories = otherChannels
        return sync
    }
}
