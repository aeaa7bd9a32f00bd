import CairnCore
public import Foundation

/// What the daemon reports about syncing (protocol/data-directory.md, "Status").
public struct SyncStatus: Sendable, Equatable {
    public var installedVersion: Int?
    public var installedStateRoot: String?
    public var highestVersionSeen: Int?
    /// The version rolled back from; sync installs only newer ones.
    public var heldBackVersion: Int?
    public var lastAttempt: String?
    public var lastSuccess: String?
    public var lastCheck: String?
    public var lastError: SyncState.LastError?
    /// The last attempt got an answer from at least one source.
    public var online: Bool
    /// A newer version is known but not installed, no check succeeded for `staleAfterPolls`
    /// poll intervals, or the installed manifest has expired. Stale versions keep serving.
    public var stale: Bool
    /// The installed manifest is past its `expires` (judged at `max(now, clock_floor)`).
    public var expired: Bool
    /// The installed manifest's `expires`.
    public var expires: String?
    /// The installed manifest's `created`: when the publisher made the knowledge that answers,
    /// which a version carried by a stick months later does not change.
    public var published: String?

    /// The status from the persisted state, the installed version and the wall clock `now`.
    public init(state: SyncState, installed: InstalledVersion?, now: Date, pollInterval: Duration, staleAfterPolls: Int) {
        installedVersion = installed?.version ?? state.installedVersion
        installedStateRoot = installed?.stateRoot.hex ?? state.installedStateRoot
        highestVersionSeen = state.highestVersionSeen
        heldBackVersion = state.heldBackVersion
        lastAttempt = state.lastAttempt
        lastSuccess = state.lastSuccess
        lastCheck = state.lastCheck
        lastError = state.lastError
        online = state.lastAttemptReachedSource ?? false
        let nowStamp = state.effectiveNow(now)
        expired = installed.map { $0.manifest.isExpired(at: nowStamp) } ?? false
        expires = installed?.manifest.expires.rfc3339
        published = installed?.manifest.created.rfc3339

        // A version held back by a rollback is known and refused on purpose: not "behind".
        let behind = (state.highestVersionSeen ?? 0) > max(installed?.version ?? 0, state.heldBackVersion ?? 0)
        // `last_check` is a wall-clock stamp, so its age is taken on the wall clock, not at the
        // clock floor (a clock reset to 1970 would make every check 54 years old). A check
        // stamped more than a minute ahead of the clock (set back since) is not recent: stale
        // until the next check, never fresh for the years the clock was ahead.
        let window = Double(pollInterval / .seconds(1)) * Double(max(1, staleAfterPolls))
        let checkedRecently = state.lastCheck.flatMap(Timestamp.init(rfc3339:))?.age(at: now).map { $0 <= window } ?? false
        stale = behind || !checkedRecently || expired
    }
}
