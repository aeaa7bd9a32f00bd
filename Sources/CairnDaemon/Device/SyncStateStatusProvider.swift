import CairnClient
import CairnSync
import Foundation

/// The socket API's view of CairnSync's state, read from the data directory at each status
/// request, with online/stale computed by CairnSync's rules.
struct SyncStateStatusProvider: SyncStatusProvider {
    let directory: DataDirectory
    let configuration: SyncConfiguration

    func syncStatus() async -> DaemonStatus.Sync {
        DaemonStatus.Sync(state: directory.readState(), installed: directory.installed(),
                   pollInterval: configuration.pollInterval, staleAfterPolls: configuration.staleAfterPolls)
    }
}

extension DaemonStatus.Sync {
    /// The API fields for CairnSync's persisted `state` (the one schema of `DIR/state.json`,
    /// protocol/data-directory.md) and the installed version.
    init(state: SyncState, installed: InstalledVersion?, pollInterval: Duration, staleAfterPolls: Int) {
        let computed = CairnSync.SyncStatus(state: state, installed: installed, now: Date(),
                                            pollInterval: pollInterval, staleAfterPolls: staleAfterPolls)
        let sources = (state.sources ?? []).map { health in
            DaemonStatus.Sync.Source(url: health.url, healthy: health.consecutiveFailures == 0 && health.lastOK != nil,
                              lastSuccess: health.lastOK, lastError: health.lastError)
        }
        self.init(lastAttempt: state.lastAttempt, lastSuccess: state.lastSuccess, lastError: state.lastError?.message,
                  online: state.lastAttempt == nil ? nil : computed.online, stale: computed.stale,
                  highestVersionSeen: state.highestVersionSeen, heldBackVersion: state.heldBackVersion, sources: sources)
    }
}
