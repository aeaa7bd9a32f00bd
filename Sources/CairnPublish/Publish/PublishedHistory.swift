import CairnCore
import CairnIndex
import CairnStore
import Foundation
import Logging

/// An earlier version, verified: its signed manifest and its snapshot inflated into the scratch
/// folder, whose rows hash to the manifest's state root.
struct PublishedVersion {
    var manifest: Manifest
    var path: String
    /// Signed by a key that vouches for its vectors (`PublishedHistory.vouchingKeys`); else it
    /// is only a delta base.
    var vouched = true
}

/// What a channel already holds: the next version number, and the newest versions to build
/// deltas from and reuse vectors of.
struct PublishedHistory {
    let repository: Repository
    let channel: String
    let trustedKeys: [PublicKey]
    /// The keys whose versions' vectors may be reused: the publish's own and the root's.
    let vouchingKeys: [PublicKey]
    let logger: Logger
    /// Versions not used, with the reason (a corrupt blob, a bad signature).
    var skipped: [String] = []
    let numbers: [Int]
    /// The version `manifest.json` names: the one devices hold.
    let current: Int?
    /// One more than the highest version seen in `versions/` or `manifest.json`: a version file
    /// left by a killed publish is never overwritten.
    let nextVersion: Int

    init(repository: Repository, channel: String, trustedKeys: [PublicKey], vouchingKeys: [PublicKey], logger: Logger) {
        self.repository = repository
        self.channel = channel
        self.trustedKeys = trustedKeys
        self.vouchingKeys = vouchingKeys
        self.logger = logger
        numbers = repository.versionNumbers(channel)
        current = Self.currentVersion(repository.manifestPath(channel), logger: logger)
        nextVersion = max(numbers.last ?? 0, current ?? 0) + 1
    }

    /// The version `manifest.json` names, its signature not checked: devices hold that version
    /// whoever signed it (a key this publish does not know, with `versions/` lost to a partial
    /// copy), and a next version numbered below it would be refused by every one of them as a
    /// rollback. Nil when there is no such file or it does not parse (logged).
    static func currentVersion(_ path: String, logger: Logger) -> Int? {
        guard FileSystem.exists(path) else { return nil }
        do {
            let bytes = try FileSystem.read(path)
            return try Manifest(json: SignedManifest.decodeEnvelope(bytes).content).version
        } catch {
            logger.warning("the channel's manifest.json does not read; versions are numbered from versions/ alone",
                           metadata: ["cairn.publish.path": "\(path)", "cairn.publish.error": "\(error)"])
            return nil
        }
    }

    /// The newest `count` versions, newest first, the current one always among them (a version
    /// file a killed publish left above it, which no device holds, must not take its place: with
    /// `--keep-deltas 1` every device would download the whole snapshot); any that fails a check
    /// is skipped and logged.
    /// - Throws: `scratch_unusable` (the scratch folder full or failing): that is no fault of
    ///   the version, and skipping it would publish without its deltas and its vectors, saying
    ///   only a note. A version that cannot be read (its files another user's, damaged) is
    ///   skipped as before.
    mutating func loadBases(count: Int, scratch: String) throws(PublishError) -> [PublishedVersion] {
        var bases: [PublishedVersion] = []
        // A pruned version has no snapshot to build a delta from (`cairn-server prune`).
        let pruned = repository.prunedThrough(channel)
        // A version file above the current one (a killed publish's) was never served: no
        // device holds it, and it must not take a base's place.
        let candidates = numbers.reversed().filter { $0 > pruned && $0 <= (current ?? .max) }
        var chosen = Array(candidates.prefix(count))
        if let current, candidates.contains(current), !chosen.contains(current), !chosen.isEmpty {
            chosen[chosen.count - 1] = current
        }
        for number in chosen {
            do throws(PublishError) {
                bases.append(try load(number, scratch: scratch))
            } catch where error.code == .scratchUnusable {
                throw error
            } catch {
                skipped.append("v\(number): \(error.message)")
                logger.warning("earlier version unusable; no delta from it", metadata: [
                    "cairn.publish.from_version": "\(number)", "cairn.publish.error": "\(error.message)"])
            }
        }
        return bases
    }

    private func load(_ number: Int, scratch: String) throws(PublishError) -> PublishedVersion {
        let path = repository.versionPath(channel, number)
        let (manifest, envelope) = try repository.signedManifest(at: path, trust: RepositoryTrust(roots: [], keys: trustedKeys))
        guard manifest.version == number, manifest.channel == channel else {
            throw PublishError(.repositoryCorrupt, "\(path) holds version \(manifest.version) of channel \(manifest.channel)")
        }
        let file = scratch + "/base-\(number).sqlite"
        try repository.extractSnapshot(of: manifest, to: file)
        do {
            let meta = try Snapshot.verifyRows(at: file, expectedStateRoot: manifest.stateRoot)
            guard meta.dimension == manifest.dimension, meta.chunkCount == manifest.chunkCount else {
                throw PublishError(.repositoryCorrupt, "the snapshot of version \(number) does not match its manifest")
            }
        } catch let error as PublishError {
            throw error
        } catch let error as IndexError {
            throw PublishError(.repositoryCorrupt, "the snapshot of version \(number) does not hash to its manifest's state root: \(error.message)", cause: error)
        } catch {
            throw PublishError(.repositoryCorrupt, "the snapshot of version \(number) cannot be checked")
        }
        // The same bytes as were verified above: the file is read once.
        let vouched = !envelope.validSigners(among: vouchingKeys, domain: SignedManifest.domain).isEmpty
        if !vouched {
            logger.notice("earlier version signed by no key of this publish or of the root in force: a delta base, its vectors not reused",
                          metadata: ["cairn.publish.from_version": "\(number)"])
        }
        return PublishedVersion(manifest: manifest, path: file, vouched: vouched)
    }
}
