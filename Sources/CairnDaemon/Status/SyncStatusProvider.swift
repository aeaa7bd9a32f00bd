public import CairnClient
public import CairnSearch
import CairnSync
import Foundation

/// Where the daemon learns the sync state. CairnSync provides the real one; the default reads
/// `DIR/state.json`.
public protocol SyncStatusProvider: Sendable {
    func syncStatus() async -> DaemonStatus.Sync
    /// A search answer's flags, read now and judged for the version that answers (taken
    /// later, on a search thread: a swap may come between).
    func searchFlags() async -> @Sendable (ServingVersion) -> SearchAnswer.Flags
}

extension SyncStatusProvider {
    /// The status's flags, whichever version answers.
    public func searchFlags() async -> @Sendable (ServingVersion) -> SearchAnswer.Flags {
        let flags = await syncStatus().searchFlags
        return { _ in flags }
    }
}

extension DaemonStatus.Sync {
    /// The freshness flags a search answer carries, from this status.
    var searchFlags: SearchAnswer.Flags {
        SearchAnswer.Flags(online: online, stale: stale, expired: expired, expires: expires)
    }
}

/// Reads `DIR/state.json` (CairnSync's `SyncState`) at each call, for a daemon built without
/// the sync side (cairnd always passes its own provider); an absent or unreadable file gives an
/// all-unknown status.
public struct StateFileStatusProvider: SyncStatusProvider {
    public let path: String
    let pollInterval: Duration

    public init(dataDirectory: String, pollInterval: Double = DaemonConfiguration().pollInterval) {
        path = (dataDirectory as NSString).appendingPathComponent(DataDirectoryLayout.stateFile)
        self.pollInterval = .milliseconds(Int64(pollInterval * 1000))
    }

    public func syncStatus() async -> DaemonStatus.Sync {
        guard let data = FileManager.default.contents(atPath: path),
              let state = try? JSONDecoder().decode(SyncState.self, from: data) else { return DaemonStatus.Sync() }
        return DaemonStatus.Sync(state: state, installed: nil, pollInterval: pollInterval,
                          staleAfterPolls: SyncConfiguration.defaultStaleAfterPolls)
    }
}
