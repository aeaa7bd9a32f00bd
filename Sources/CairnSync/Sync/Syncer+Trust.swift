import CairnCore
import CairnStore
import CairnThreads
import Foundation

/// The root chain walk, the signing policy, fast-forward recovery and the clock floor of an
/// attempt (protocol/root.md).
extension Syncer {
    /// The most root steps one attempt takes. Reaching it ends the attempt before any manifest
    /// is checked (never against an intermediate root); the next attempt goes on from there.
    public static let maxRootSteps = 1024

    /// The policy manifests from `base` are checked against: with a pinned root, after walking
    /// the source's chain (persisting each accepted root before the next step) and checking the
    /// newest root's expiry and whether the installed version still counts; else the pinned keys.
    /// `installedDamaged`: the installed manifest changed on the disk (`DataDirectory.manifestDamage`),
    /// as the attempt found it.
    func signingPolicy(base: String, state: inout SyncState, reached: inout Bool,
                       installed: InstalledVersion?, installedDamaged: Bool) async throws(SyncError) -> SigningPolicy {
        guard configuration.trustedRoot != nil else { return SigningPolicy(keys: configuration.trustedKeys) }
        guard var chain = trust.current else {
            throw SyncError(.rootRefused, "the pinned root (trusted_root) is not acceptable; fix the device's configuration")
        }
        // What the walk revokes, net: a key one step removes and a later one adds back is not.
        // Applied once the walk ends, or when a later step is refused (the roots accepted until
        // then stay, and the next walk starts after them). Measured from the root the last
        // applied walk ended at, not from this walk's start: roots are written as they are
        // accepted and the state at the attempt's end, and a kill in between would else lose
        // the lowering for good (this walk would start past the roots that removed the key).
        let start = state.revokedThroughRoot.flatMap { through in chain.roots.first { $0.version == through } } ?? chain.current
        var revocationApplied = false
        func applyRevocation(_ state: inout SyncState) {
            revocationApplied = true
            let end = chain.current
            if start.signingKeys.contains(where: { !end.signingKeys.contains($0) }) { revoked(by: end, installed: installed, state: &state) }
            state.revokedThroughRoot = end.version
        }
        defer { if !revocationApplied { applyRevocation(&state) } }
        var steps = 0
        while true {
            let next = chain.current.version + 1
            let (fetched, stats) = try await downloader.fetchOptional(url: "\(base)/root/\(DataDirectoryLayout.rootFile(next))",
                                                                      access: configuration.access(for: base))
            lastAttemptStats.add(stats)
            guard let bytes = fetched else { break }
            reached = true
            // A host that answers every missing path with its page and 200 (a single-page site's
            // fallback on a CDN, Netlify or Firebase) has no root there: a body that starts as
            // markup does is taken as absent, as its 404 would be. An attacker gains nothing (he
            // can answer 404); a damaged root file (random bytes, a cut) is still refused.
            if bytes.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) == UInt8(ascii: "<") {
                // Said once per source and root, not at every poll for as long as the host does so.
                logger.log(level: webPageRootsSaid.insert("\(base) \(next)").inserted ? .warning : .debug,
                           "the source answered root \(next) with a web page: taken as no root \(next)",
                           metadata: ["cairn.sync.source": "\(base)"])
                break
            }
            // Counted once a root is there (not a web page): a device exactly the cap behind walks them all.
            guard steps < Self.maxRootSteps else {
                throw SyncError(.rootRefused, "the source offers more than \(Self.maxRootSteps) new roots at once; the walk goes on at the next attempt from root \(chain.current.version)")
            }
            steps += 1
            let root: RootMetadata
            do { root = try chain.accept(next: bytes) } catch {
                throw SyncError(.rootRefused, "root \(next) is refused: \(error.message); keeping root \(chain.current.version)", cause: error)
            }
            let directory = self.directory
            try await BackgroundWork.run { () throws(SyncError) in try directory.persistRoot(bytes, version: next) }
            trust.set(chain)
            // Its signing keys may have signed what is installed next: judged by them too.
            directory.knowManifestSigners(chain.everySigningKey)
            state.raiseClockFloor(to: root.created)
            logger.notice("accepted root \(root.version): signing threshold \(root.signingThreshold) of \(root.signingKeys.count) keys",
                          metadata: ["cairn.sync.root": "\(root.version)"])
        }
        applyRevocation(&state)
        let current = chain.current
        // Recovery first: it resets a clock floor that a revoked key's version may have raised.
        noteRecovery(installed: installedDamaged ? nil : installed, chain: chain, state: &state)
        // The pinned root and the roots re-verified at start-up count too.
        state.raiseClockFloor(to: current.created)
        if current.isExpired(at: state.effectiveNow(now())) {
            guard configuration.expiredUpdates == .install else {
                throw SyncError(.rootExpired, "the trusted root \(current.version) expired at \(current.expires) (expired_updates = refuse); the installed version keeps serving")
            }
        }
        return chain.policy
    }

    /// A walk that removes a signing key revokes it: what that key's signatures may have
    /// raised goes, whether or not the installed version still counts (it may: signed by a key
    /// the step kept, beside the stolen one). The highest version seen (the attempt's manifest
    /// sets it again) and the clock floor (a thief could re-sign the installed version dated far
    /// ahead) always; with nothing installed, the floor a forgotten version left (one that could
    /// not be served may have been the thief's). A held-back version is not lifted here, but
    /// passed over while the current root holds none of its signers (`holdCounts`).
    private func revoked(by root: RootMetadata, installed: InstalledVersion?, state: inout SyncState) {
        state.highestVersionSeen = nil
        state.clockFloor = root.created.rfc3339
        if installed == nil, let forgotten = state.forgottenVersion {
            (state.forgottenVersion, state.forgottenStateRoot) = (nil, nil)
            state.liftHold()
            logger.notice("root \(root.version) revokes a signing key: version \(forgotten), which could not be served, is no longer the rollback floor")
        }
    }

    /// Whether the held-back version still holds: not while the current root holds none of the
    /// keys that signed it (`held_back_signers`), a thief's version rolled back from, which would
    /// else hold back every version the publisher makes below its number. Asked of the current
    /// root, not of a walk: a key removed by one source's root and added back by another's leaves
    /// the hold as it was.
    func holdCounts(_ state: SyncState) -> Bool {
        guard state.heldBackVersion != nil, let signers = state.heldBackSigners, !signers.isEmpty,
              let root = trust.current?.current else { return true }
        return root.signingKeys.contains { signers.contains($0.keyID.description) }
    }

    /// Enters recovery when the installed version is signed by no signing key of the chain's
    /// current root, and leaves it when it is (checked at every attempt). Entering resets the
    /// version floors and the clock floor (to the root's `created`: what a revoked key signed
    /// may have raised them), and records since when a manifest must be made to replace it: the
    /// `created` of the first root under which the installed version stopped counting. Not for
    /// a manifest changed on the disk since its install (the caller passes nil): that is no sign
    /// of a revoked key's version, whose floors would go (a rollback's hold, the highest version
    /// seen); one signed by keys outside the chain still is. (A flip in a signature's key id
    /// names an unknown key and cannot be told from that: it recovers.)
    private func noteRecovery(installed: InstalledVersion?, chain: TrustChain, state: inout SyncState) {
        guard let installed, let signers = installed.signers(among: chain.roots.flatMap(\.signingKeys)) else { return }
        func counts(_ root: RootMetadata) -> Bool { root.signingKeys.contains { signers.contains($0.keyID) } }
        let root = chain.current
        if counts(root) {
            if state.recoveringFrom != nil {
                logger.notice("no longer recovering: installed version \(installed.version) is signed by a signing key of root \(root.version)")
                state.endRecovery()
            }
            return
        }
        let stopped = chain.roots.lastIndex(where: counts).map { $0 + 1 } ?? 0
        // Also for a recovery a cairnd before 2026-12-06 began, which did not record it.
        if state.recoveringSince == nil { state.recoveringSince = chain.roots[stopped].created.rfc3339 }
        guard state.recoveringFrom == nil else { return }
        state.recoveringFrom = installed.version
        Self.resetFloors(&state, to: root)
        logger.warning("recovering: installed version \(installed.version) is signed only by keys that root \(root.version) revoked; the publisher's next version made since root \(chain.roots[stopped].version) installs whatever its number")
    }

    /// Resets the floors a revoked key's version may have raised: the highest version seen, a
    /// held-back version, and the clock floor (to `root`'s `created`: the thief may have dated
    /// that version years ahead).
    private static func resetFloors(_ state: inout SyncState, to root: RootMetadata) {
        state.highestVersionSeen = nil
        state.liftHold()
        state.clockFloor = root.created.rfc3339
    }

    /// Verifies `bytes` under `policy`, as a `SyncError` with the policy's stable code.
    func verifyManifest(_ bytes: [UInt8], policy: SigningPolicy) throws(SyncError) -> Manifest {
        do {
            return try SignedManifest.decodeAndVerify(bytes, policy: policy)
        } catch {
            let code: SyncError.Code = switch error.code {
            case .unsupportedFormat: .unsupportedFormat
            case .thresholdNotMet: .thresholdNotMet
            case .keyRevoked: .keyRevoked
            default: .manifestRefused
            }
            throw SyncError(code, "the manifest is refused: \(error.message)", cause: error)
        }
    }
}
