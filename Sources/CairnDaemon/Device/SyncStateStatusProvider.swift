import CairnCore
import CairnClient
import CairnSearch
import CairnSync
import Foundation

/// The socket API's view of CairnSync's state, read from the data directory at each status
/// request, with online/stale computed by CairnSync's rules.
struct SyncStateStatusProvider: SyncStatusProvider {
    let directory: DataDirectory
    let configuration: SyncConfiguration
    let trust: TrustHolder
    let progress: SyncProgress
    /// The installed version's spare (`Syncer.spareState`).
    let spare: @Sendable (InstalledVersion?) -> SpareState?

    func syncStatus() async -> DaemonStatus.Sync {
        let (state, installed) = (directory.readState(), directory.installed())
        var sync = DaemonStatus.Sync(state: state, installed: installed,
                                     pollInterval: configuration.pollInterval, staleAfterPolls: configuration.staleAfterPolls)
        (sync.previousVersion, sync.previousDropped, sync.maxDiskBytes) =
            (directory.previousVersion(), state.previousDropped, configuration.maxDiskBytes)
        sync.newerVersion = directory.newerVersion()
        sync.spare = spare(installed)?.rawValue
        // The configured sources, in their order: state.json keeps the health of sources since
        // removed from the configuration, which status would list as unhealthy for ever.
        sync.sources = configuration.sources.map { url in
            var source = sync.sources.first { $0.url == url } ?? DaemonStatus.Sync.Source(url: url)
            // nil for a file:// source (`access(for:)`).
            source.proxy = configuration.access(for: url).proxy.map { $0.isEmpty ? "none" : $0 }
            return source
        }
        let reading = progress.reading()
        (sync.attemptsStarted, sync.attemptsFinished, sync.lastOutcome) = (reading.started, reading.finished, reading.lastOutcome)
        sync.requestHeldUntil = reading.requestHeldUntil.map(SyncState.time)
        if let operation = reading.operation, let started = reading.operationStarted {
            sync.operation = DaemonStatus.Operation(kind: operation.rawValue, started: SyncState.time(started))
        }
        sync.progress = reading.current.map {
            DaemonStatus.Progress(attempt: $0.attempt, phase: $0.phase.rawValue, version: $0.version, bytesDone: $0.bytesDone,
                                  bytesTotal: $0.bytesTotal, bytesPerSecond: $0.bytesPerSecond.map { ($0 * 10).rounded() / 10 },
                                  etaSeconds: $0.etaSeconds.map { ($0 * 10).rounded() / 10 }, started: SyncState.time($0.started), source: $0.source,
                                  waiting: $0.waiting)
        }
        if let chain = trust.current {
            let root = chain.current
            sync.trust = DaemonStatus.Trust(
                mode: "root", rootVersion: root.version, rootExpires: root.expires.rfc3339,
                rootExpired: root.isExpired(at: state.effectiveNow(Date())), signingThreshold: root.signingThreshold,
                signingKeys: root.signingKeys.map(\.keyID.hex), recovering: state.recoveringFrom != nil,
                recoveringFrom: state.recoveringFrom)
        } else if configuration.trustedRoot == nil, !configuration.trustedKeys.isEmpty {
            sync.trust = DaemonStatus.Trust(mode: "keys", signingThreshold: 1, signingKeys: configuration.trustedKeys.map(\.keyID.hex),
                                            recovering: state.recoveringFrom != nil, recoveringFrom: state.recoveringFrom)
        }
        return sync.redactingPasswords()
    }

    func searchFlags() async -> @Sendable (ServingVersion) -> SearchAnswer.Flags {
        let (state, installed, configuration) = (directory.readState(), directory.installed(), configuration)
        return { served in
            Self.flags(state: state, installed: installed, servedManifest: served.manifest, servedVersion: served.version,
                       servedStateRoot: served.stateRoot, pollInterval: configuration.pollInterval,
                       staleAfterPolls: configuration.staleAfterPolls)
        }
    }

    /// The flags of an answer from the version served (`servedVersion`, its state root and its
    /// signed manifest's bytes): `expired`, `expires` and whether a newer version is known are
    /// judged on its manifest, not on the one `current` names, which a swap may have changed
    /// since the version was taken (or will change before).
    static func flags(state: SyncState, installed: InstalledVersion?, servedManifest: [UInt8], servedVersion: Int,
                      servedStateRoot: String, pollInterval: Duration, staleAfterPolls: Int) -> SearchAnswer.Flags {
        var version = installed
        if installed?.version != servedVersion || installed?.stateRoot.hex != servedStateRoot {
            version = InstalledVersion(signedManifest: servedManifest)
        }
        return DaemonStatus.Sync(state: state, installed: version, pollInterval: pollInterval, staleAfterPolls: staleAfterPolls).searchFlags
    }
}

extension DaemonStatus.Sync {
    /// The same with every source URL's password hidden, in the URLs and in the errors that
    /// name them (`SourceURL.redactingPasswords`): the socket's group may not read the config.
    func redactingPasswords() -> Self {
        let redact = SourceURL.redactingPasswords
        var sync = self
        sync.sources = sources.map { source in
            var source = source
            (source.url, source.lastError) = (redact(source.url), source.lastError.map(redact))
            return source
        }
        (sync.lastError, sync.lastOutcome) = (lastError.map(redact), lastOutcome.map(redact))
        sync.progress?.source = progress?.source.map(redact)
        return sync
    }

    /// The API fields for CairnSync's persisted `state` (the one schema of `DIR/state.json`,
    /// protocol/data-directory.md) and the installed version.
    init(state: SyncState, installed: InstalledVersion?, pollInterval: Duration, staleAfterPolls: Int) {
        let computed = CairnSync.SyncStatus(state: state, installed: installed, now: Date(),
                                            pollInterval: pollInterval, staleAfterPolls: staleAfterPolls)
        let sources = (state.sources ?? []).map { health in
            DaemonStatus.Sync.Source(url: health.url, healthy: health.consecutiveFailures == 0 && health.lastOK != nil,
                              lastSuccess: health.lastOK, lastError: health.lastError,
                              failuresInARow: health.consecutiveFailures)
        }
        self.init(lastAttempt: state.lastAttempt, lastSuccess: state.lastSuccess, lastError: state.lastError?.message,
                  online: state.lastAttempt == nil ? nil : computed.online, stale: computed.stale,
                  highestVersionSeen: state.highestVersionSeen, heldBackVersion: state.heldBackVersion, sources: sources)
        lastErrorCode = state.lastError?.code
        lastCheck = state.lastCheck
        expiredInstalls = state.expiredInstalls
        expired = installed == nil ? nil : computed.expired
        expires = computed.expires
        published = computed.published
        clockFloor = state.clockFloor
    }
}
