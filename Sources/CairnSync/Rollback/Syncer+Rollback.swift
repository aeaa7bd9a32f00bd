import CairnCore
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
        try await exclusively { () async throws(SyncError) -> RollbackResult in try await self.rollBackNow() }
    }

    private func rollBackNow() async throws(SyncError) -> RollbackResult {
        guard let current = directory.installed(), let previous = directory.previous(),
              let target = directory.linkTarget(directory.previousLink), previous.version != current.version else {
            throw SyncError(.noPreviousVersion, "no previous version is kept in \(directory.path); nothing to roll back to")
        }
        // A previous version signed only by keys the newest root revoked is a routine
        // rotation's older version, or a stolen key's (after a fast-forward recovery the version
        // replaced, numbered above or below the publisher's next). The publisher vouches for its
        // own: the installed version, signed under the newest root, names it as a delta base
        // (its version and state root). Anything else must not come back by a rollback.
        func signers(_ version: InstalledVersion, among keys: [PublicKey]) -> Int {
            let envelope = try? SignedManifest.decodeEnvelope(try FileSystem.read(version.manifestPath))
            return envelope?.validSigners(among: keys, domain: SignedManifest.domain).count ?? 0
        }
        // A device pinned to keys: a key taken out of `trusted_key` (a stolen one) no longer
        // counts for what it signed, unless the installed version, which a trusted key signed,
        // names that version as a delta base (a routine change of key: pin the new, publish,
        // unpin the old; protocol/keys.md).
        let keys = configuration.trustedKeys
        if configuration.trustedRoot == nil, !keys.isEmpty, signers(previous, among: keys) == 0 {
            let vouched = signers(current, among: keys) > 0 && current.manifest.deltas.contains {
                $0.fromVersion == previous.version && $0.fromStateRoot == previous.stateRoot
            }
            guard vouched else {
                throw SyncError(.previousUnusable, "previous version \(previous.version) is signed by no key in trusted_key, and installed version \(current.version) does not name it as a delta base; nothing was changed")
            }
        }
        if configuration.trustedRoot != nil, let root = trust.current?.current {
            if signers(previous, among: root.signingKeys) == 0 {
                let vouched = signers(current, among: root.signingKeys) >= root.signingThreshold && current.manifest.deltas.contains {
                    $0.fromVersion == previous.version && $0.fromStateRoot == previous.stateRoot
                }
                guard vouched else {
                    throw SyncError(.previousUnusable, "previous version \(previous.version) is signed only by keys root \(root.version) revoked, and installed version \(current.version) does not name it as a delta base, so it cannot be told from a stolen key's version; nothing was changed")
                }
            }
        }
        do {
            try await BackgroundWork.run { () throws(SyncError) in
                try IndexBuilder.verify(index: previous.indexPath, manifest: previous.manifest)
            }
        } catch {
            throw SyncError(.previousUnusable, "previous version \(previous.version) fails verification (\(error.message)); nothing was changed",
                            cause: error)
        }
        var state = directory.readState()
        let heldBefore = state.heldBackVersion
        let from = directory.linkTarget(directory.currentLink)
        state.heldBackVersion = current.version
        try directory.writeState(state)
        do {
            try directory.replaceLink(directory.currentLink, with: target)
        } catch {
            state.heldBackVersion = heldBefore
            await persist(state)
            throw error
        }
        unlink(directory.previousLink)
        (installedRows, installedFileCheck) = (nil, nil)
        try directory.syncFolder(directory.path)
        guard let now = directory.installed() else {
            throw SyncError(.io, "the rolled-back version \(previous.version) cannot be read back")
        }
        state.setInstalled(now)
        await persist(state)
        logger.notice("rolled back", metadata: ["cairn.sync.version": "\(now.version)",
                                                "cairn.sync.held_back_version": "\(current.version)"])
        do throws(SyncError) { try await onInstalled(now, nil) } catch {
            // The daemon still serves the version rolled back from: the links and the state go
            // back to it, and the previous version stays the rollback target.
            do {
                if let from { try directory.replaceLink(directory.currentLink, with: from) }
                try directory.replaceLink(directory.previousLink, with: target)
                try directory.syncFolder(directory.path)
            } catch let undo {
                logger.error("the rolled-back version cannot be served, and the links cannot be put back: \(undo.message)")
            }
            state.heldBackVersion = heldBefore
            state.setInstalled(current)
            await persist(state)
            throw SyncError(.previousUnusable, "previous version \(previous.version) cannot be served (\(error.message)); nothing was changed",
                            cause: error)
        }
        return RollbackResult(version: now, rolledBackFrom: current.version)
    }
}
