import CairnCore
import CairnStore
import CairnThreads
import Foundation

/// The root chain walk, the signing policy, fast-forward recovery and the clock floor of an
/// attempt (protocol/root.md).
extension Syncer {
    /// The most root steps one attempt takes; the next attempt goes on from there.
    static let maxRootSteps = 64

    /// The policy manifests from `base` are checked against: with a pinned root, after walking
    /// the source's chain (persisting each accepted root before the next step) and checking the
    /// newest root's expiry and whether the installed version still counts; else the pinned keys.
    func signingPolicy(base: String, state: inout SyncState, reached: inout Bool,
                       installed: InstalledVersion?) async throws(SyncError) -> SigningPolicy {
        guard configuration.trustedRoot != nil else { return SigningPolicy(keys: configuration.trustedKeys) }
        guard var chain = trust.current else {
            throw SyncError(.rootRefused, "the pinned root (trusted_root) is not acceptable; fix the device's configuration")
        }
        for _ in 0..<Self.maxRootSteps {
            let next = chain.current.version + 1
            let (fetched, stats) = try await downloader.fetchOptional(url: "\(base)/root/\(DataDirectoryLayout.rootFile(next))",
                                                                      access: configuration.access(for: base))
            lastAttemptStats.add(stats)
            guard let bytes = fetched else { break }
            reached = true
            let root: RootMetadata
            do { root = try chain.accept(next: bytes) } catch {
                throw SyncError(.rootRefused, "root \(next) is refused: \(error.message); keeping root \(chain.current.version)", cause: error)
            }
            let directory = self.directory
            try await BackgroundWork.run { () throws(SyncError) in try directory.persistRoot(bytes, version: next) }
            trust.set(chain)
            state.raiseClockFloor(to: root.created)
            logger.notice("accepted root \(root.version): signing threshold \(root.signingThreshold) of \(root.signingKeys.count) keys",
                          metadata: ["cairn.sync.root": "\(root.version)"])
        }
        let current = chain.current
        // The pinned root and the roots re-verified at start-up count too.
        state.raiseClockFloor(to: current.created)
        if current.isExpired(at: state.effectiveNow(now())) {
            guard configuration.expiredUpdates == .install else {
                throw SyncError(.rootExpired, "the trusted root \(current.version) expired at \(current.expires) (expired_updates = refuse); the installed version keeps serving")
            }
        }
        noteRecovery(installed: installed, root: current, state: &state)
        return chain.policy
    }

    /// Enters recovery when the installed version is signed by no signing key of `root`.
    private func noteRecovery(installed: InstalledVersion?, root: RootMetadata, state: inout SyncState) {
        guard let installed, state.recoveringFrom == nil,
              let bytes = try? FileSystem.read(installed.manifestPath),
              let envelope = try? SignedManifest.decodeEnvelope(bytes),
              envelope.validSigners(among: root.signingKeys, domain: SignedManifest.domain).isEmpty else { return }
        state.recoveringFrom = installed.version
        state.highestVersionSeen = nil
        state.heldBackVersion = nil
        logger.warning("recovering: installed version \(installed.version) is signed only by keys that root \(root.version) revoked; the publisher's next version installs whatever its number")
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
