import CairnSync
import Foundation

/// The socket API's view of CairnSync's state: `DIR/state.json` and the installed version,
/// read at each status request, with online/stale computed by CairnSync's rules.
struct SyncStateStatusProvider: SyncStatusProvider {
    let directory: DataDirectory
    let configuration: SyncConfiguration

    func syncStatus() async -> SyncStatus {
        let state = directory.readState()
        let computed = CairnSync.SyncStatus(state: state, installed: directory.installed(), now: Date(),
                                            pollInterval: configuration.pollInterval,
                                            staleAfterPolls: configuration.staleAfterPolls)
        let sources = (state.sources ?? []).map { health in
            SyncStatus.Source(url: health.url, healthy: health.consecutiveFailures == 0 && health.lastOK != nil,
                              lastSuccess: health.lastOK, lastError: health.lastError)
        }
        return SyncStatus(lastAttempt: state.lastAttempt, lastSuccess: state.lastSuccess,
                          lastError: state.lastError.map { "\($0.code): \($0.message)" },
                          online: state.lastAttempt == nil ? nil : computed.online, stale: computed.stale,
                          highestVersionSeen: state.highestVersionSeen, sources: sources)
    }
}
