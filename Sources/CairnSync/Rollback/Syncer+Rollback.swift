import CairnCore
import CairnIndex
import CairnStore
import CairnThreads
import Foundation
import Logging

/// What `Syncer.rollback()` did.
public struct RollbackResult: Sendable, Equatable {
    /// The version now current (the former previous one).
    public let version: InstalledVersion
    /// The version rolled back from, now held back: sync installs only newer ones.
    public let rolledBackFrom: Int
}

extension Syncer {
    /// Makes the previous installed version current again (protocol/data-directory.md,
    /// "Rollback"): waits for a running attempt, verifies the previous version against its
    /// signed state root, records the held-back version, swaps `current` atomically, drops
    /// `previous`, and hands the version to the query path through `onInstalled`.
    /// - Throws: `.noPreviousVersion` when there is none, `.previousUnusable` when it fails
    ///   verification (nothing changes), `.io` when the swap fails.
    public func rollback() async throws(SyncError) -> RollbackResult {
        try await exclusively { () async throws(SyncError) -> RollbackResult in
            await stopSpare()
            progress.operating(.rollback, at: now())
            defer { progress.operating(nil, at: now()) }
            return try await self.rollBackNow()
        }
    }

    private func rollBackNow() async throws(SyncError) -> RollbackResult {
        // A previous version whose folder does not read is kept (damage, or a downgrade of
        // cairnd), not absent: said as unusable, with why, not as "none is kept".
        if let current = directory.installed(), let target = directory.linkTarget(directory.previousLink),
           target != directory.linkTarget(directory.currentLink) {
            do { _ = try directory.readVersion(target) } catch {
                throw SyncError(.previousUnusable, "the previous version (\(target)) cannot be read: \(error.message); version \(current.version) keeps serving")
            }
        }
        guard let current = directory.installed(), let previous = directory.previous(),
              let target = directory.linkTarget(directory.previousLink), previous.version != current.version else {
            throw SyncError(.noPreviousVersion, "no previous version is kept in \(directory.path); nothing to roll back to")
        }
        // A previous version no current signing key signed is a routine rotation's (or change
        // of pinned key's) older version, or a stolen key's (after a fast-forward recovery the
        // version replaced, numbered above or below the publisher's next; on a device pinned to
        // keys, one whose key was taken out of `trusted_key`). The publisher vouches for its own:
        // the installed version, signed as the policy asks, names it as a delta base (its version
        // and state root). Anything else must not come back by a rollback.
        let policy: (keys: [PublicKey], threshold: Int, whose: String)? =
            if configuration.trustedRoot != nil {
                trust.current.map { ($0.current.signingKeys, $0.current.signingThreshold, "keys root \($0.current.version) revoked") }
            } else if !configuration.trustedKeys.isEmpty {
                (configuration.trustedKeys, 1, "keys no longer in trusted_key")
            } else {
                nil
            }
        // Who signed the version rolled back from, under the policy (read once: also recorded).
        let currentSigners = policy.flatMap { current.signers(among: $0.keys) }
        if let policy {
            if (previous.signers(among: policy.keys)?.count ?? 0) == 0 {
                let vouched = (currentSigners?.count ?? 0) >= policy.threshold && current.manifest.deltas.contains {
                    $0.fromVersion == previous.version && $0.fromStateRoot == previous.stateRoot
                }
                guard vouched else {
                    throw SyncError(.previousUnusable, "previous version \(previous.version) is signed only by \(policy.whose), and installed version \(current.version) does not name it as a delta base, so it cannot be told from a stolen key's version; nothing was changed")
                }
            }
        }
        do {
            try await BackgroundWork.run { () throws(SyncError) in
                try IndexBuilder.verify(index: previous.indexPath, manifest: previous.manifest)
            }
        } catch where [IndexError.Code.io, .diskFull].contains((error.cause as? IndexError)?.code) {
            // The check could not run (a read-only or full disk): the version may be fine.
            throw SyncError(.io, "previous version \(previous.version) cannot be checked before the rollback (\(error.message)); nothing was changed",
                            cause: error)
        } catch {
            throw SyncError(.previousUnusable, "previous version \(previous.version) fails verification (\(error.message)); nothing was changed",
                            cause: error)
        }
        var state = directory.readState()
        let heldBefore = (state.heldBackVersion, state.heldBackSigners)
        let from = directory.linkTarget(directory.currentLink)
        state.heldBackVersion = current.version
        // Who signed what is held back: while the newest root holds none of them, it is passed over.
        state.heldBackSigners = configuration.trustedRoot == nil ? nil : currentSigners.map { $0.map(\.description).sorted() }
        do { try directory.writeState(state) } catch {
            // Nothing changed: the state kept in memory for status (the file cannot be written)
            // must not say the version rolled back from is held back.
            (state.heldBackVersion, state.heldBackSigners) = heldBefore
            try? directory.writeState(state)
            throw error
        }
        do {
            try directory.replaceLink(directory.currentLink, with: target)
        } catch {
            (state.heldBackVersion, state.heldBackSigners) = heldBefore
            await persist(state)
            throw error
        }
        unlink(directory.previousLink)
        // The version served until now keeps its rows if the rollback is put back.
        let (rowsBefore, checkBefore) = (installedRows, installedFileCheck)
        (installedRows, installedFileCheck) = (nil, nil)
        /// The daemon still serves the version rolled back from: the links and the state go back
        /// to it, and the previous version stays the rollback target.
        func putBack() async {
            do {
                if let from { try directory.replaceLink(directory.currentLink, with: from) }
                try directory.replaceLink(directory.previousLink, with: target)
                try directory.syncFolder(directory.path)
            } catch let undo {
                logger.error("the rollback failed, and the links cannot be put back: \(undo.message)")
            }
            (state.heldBackVersion, state.heldBackSigners) = heldBefore
            state.setInstalled(current)
            (installedRows, installedFileCheck) = (rowsBefore, checkBefore)
            await persist(state)
        }
        let now: InstalledVersion
        do throws(SyncError) {
            try directory.syncFolder(directory.path)
            guard let read = directory.installed() else {
                throw SyncError(.io, "the rolled-back version \(previous.version) cannot be read back")
            }
            now = read
        } catch {
            await putBack()
            throw error
        }
        state.setInstalled(now)
        await persist(state)
        logger.notice("rolled back", metadata: ["cairn.sync.version": "\(now.version)",
                                                "cairn.sync.held_back_version": "\(current.version)"])
        // Served already (a version kept that cannot be opened now was current): opening it
        // again could only fail for the cause that keeps the other one unopened.
        do throws(SyncError) { if servedVersion?() != now.version { try await onInstalled(now, nil) } } catch {
            await putBack()
            throw SyncError(.previousUnusable, "previous version \(previous.version) cannot be served (\(error.message)); nothing was changed",
                            cause: error)
        }
        return RollbackResult(version: now, rolledBackFrom: current.version)
    }
}
