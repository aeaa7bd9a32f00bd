public import CairnCore
import CairnStore
import Foundation

/// Signatures gathered on several machines (protocol/root.md, "Publishing"): `publish --stage`
/// leaves a signed manifest in `staged/<channel>/<n>.json`; `sign` adds signatures to a copy of
/// that file anywhere (no repository, no serving host); `release` merges the copies, checks the
/// threshold under the newest root and makes the version current.
public enum StagedRelease {
    /// Adds the signatures of `keys` to the signed manifest file at `path` (in place, atomically),
    /// skipping keys that already signed. Returns the manifest and every key id that signed it.
    /// A file inside a repository (`REPO/staged/<channel>/<n>.json`) is signed under the
    /// repository's publish lock, waiting up to `lockWait` seconds for it.
    /// - Throws: `.badInput` for a file that is not a signed manifest, `.locked`, `.io`.
    public static func sign(file: String, keys: [PublisherKey], lockWait: Double = 5) throws(PublishError) -> (Manifest, [KeyID]) {
        // Absolute, so that the folder the rename lands in can be fsynced; links resolved, so that
        // a link to a staged file is known as one (and stays a link).
        let path = URL(fileURLWithPath: file).standardizedFileURL.resolvingSymlinksInPath().path
        // A release running meanwhile would remove the file and this write bring it back (a
        // released version still staged), or miss the signature; a publish's start removes the
        // `.tmp-*` file the write goes through.
        let lock = try repository(staging: path).map { root throws(PublishError) in try PublishLock(repository: root, wait: lockWait) }
        defer { withExtendedLifetime(lock) {} }
        let (envelope, manifest) = try read(path)
        // A key signing again replaces what the file held under its id (a damaged copy).
        let own = Set(keys.map(\.keyID))
        let signed = SignedEnvelope(content: envelope.content, signatures: envelope.signatures.filter { !own.contains($0.keyID) },
                                    foreign: envelope.foreign)
            .adding(SignedEnvelope.sign(envelope.content, domain: SignedManifest.domain, keys: keys))
        do { try FileSystem.writeAtomically(signed.encode(field: "manifest"), to: path) } catch {
            throw PublishError(.io, "cannot write \(path): \(error.message)", cause: error)
        }
        return (manifest, signed.signatures.map(\.keyID))
    }

    /// The repository whose `staged/<channel>/` folder holds `path`, if it lies in one: the
    /// folder above `staged` holds `channels/`.
    public static func repository(staging path: String) -> String? {
        let channelFolder = (path as NSString).deletingLastPathComponent
        let staged = (channelFolder as NSString).deletingLastPathComponent
        guard (staged as NSString).lastPathComponent == "staged" else { return nil }
        let root = (staged as NSString).deletingLastPathComponent
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root + "/channels", isDirectory: &isFolder), isFolder.boolValue else { return nil }
        return root
    }

    /// Releases the staged version of `channel`: its signatures and those of `copies` (files of
    /// the same manifest signed elsewhere) must meet the newest root's threshold (or, without a
    /// root, include one key stored under `keys/`); then `versions/<n>.json` and `manifest.json`
    /// are written, in that order, and the staged file is removed. Run again after it stopped
    /// between the two, it writes `manifest.json` from the version file.
    /// - Throws: `.thresholdNotMet` when the valid signatures do not meet the policy, whatever the
    ///   reason (nothing written), `.invalidArgument` (nothing staged, a copy
    ///   of another manifest, a version that is no longer next, one expired at `now`, default the clock), `.locked`,
    ///   `.io`.
    public static func release(repository: Repository, channel: String, copies: [String],
                               lockWait: Double = 5, now: Timestamp? = nil) throws(PublishError) -> Manifest {
        let lock = try PublishLock(repository: repository.root, wait: lockWait)
        defer { withExtendedLifetime(lock) {} }
        guard let version = repository.stagedVersions(channel).last else {
            throw PublishError(.invalidArgument, "no version of \(channel) is staged (publish --stage first)")
        }
        let stagedPath = repository.stagedPath(channel, version)
        var (envelope, manifest) = try read(stagedPath)
        for copy in copies {
            let (other, _) = try read(copy)
            guard other.content.bytes == envelope.content.bytes else {
                throw PublishError(.invalidArgument, "\(copy) signs another manifest than \(stagedPath)")
            }
            envelope = envelope.adding(other.signatures)
        }
        let writer = RepositoryWriter(repository: repository, channel: channel)
        // A release stopped after `versions/<n>.json` and before `manifest.json` (killed, a full
        // disk): that file, already checked and immutable, becomes current.
        let newest = repository.versionNumbers(channel).last ?? 0
        if manifest.version == newest, manifest.channel == channel,
           let written = try? FileSystem.read(repository.versionPath(channel, newest)),
           (try? SignedManifest.decodeEnvelope(written))?.content.bytes == envelope.content.bytes {
            try writer.writeCurrent(written)
            unlink(stagedPath)
            return manifest
        }
        let next = newest + 1
        guard manifest.version == next, manifest.channel == channel else {
            throw PublishError(.invalidArgument, "\(stagedPath) holds version \(manifest.version) of \(manifest.channel); the next version of \(channel) is \(next)")
        }
        // Signatures gathered over weeks can outlast the manifest: devices would refuse it
        // (`expired_updates = refuse`) or serve it flagged expired.
        guard !manifest.isExpired(at: now ?? Timestamp(clamping: Date())) else {
            throw PublishError(.invalidArgument, "version \(manifest.version) expired at \(manifest.expires), before its release; nothing was released: delete \(stagedPath) and publish it again with --stage")
        }
        let trust = try repository.trust(keys: repository.storedKeys())
        let policy = trust.current?.signingPolicy(earlier: trust.roots.dropLast()) ?? SigningPolicy(keys: trust.keys)
        do { try policy.check(envelope, domain: SignedManifest.domain, what: "staged manifest") } catch {
            throw PublishError(.thresholdNotMet, "\(error.code): \(error.message)", cause: error)
        }
        // Staged before a root rotation: `verify` and `history` judge a manifest under the root
        // in force at its `created`, so it must meet that root's policy too (devices check the
        // newest root's).
        let (inForce, inForceRoot) = trust.policy(forCreated: manifest.created)
        if let inForceRoot, inForceRoot != trust.current?.version {
            do { try inForce.check(envelope, domain: SignedManifest.domain, what: "staged manifest") } catch {
                throw PublishError(.thresholdNotMet, "version \(manifest.version) was staged under root \(inForceRoot), before root \(trust.current?.version ?? 0): its signatures must meet root \(inForceRoot)'s too (\(error.message)); delete \(stagedPath) and publish it again with --stage")
            }
        }
        // Only signatures that count are released: copies signed by other keys could push the
        // file past the 16 signatures devices read.
        // One verifying signature per key: a copy's damaged duplicate of a key's signature goes.
        envelope = envelope.verified(among: policy.keys + inForce.keys, domain: SignedManifest.domain)
        guard envelope.signatures.count <= SignedManifest.maxSignatures else {
            throw PublishError(.invalidArgument, "the staged manifest has \(envelope.signatures.count) valid signatures; devices read at most \(SignedManifest.maxSignatures)")
        }
        let bytes = envelope.encode(field: "manifest")
        try writer.writeVersion(version, bytes: bytes)
        try writer.writeCurrent(bytes)
        unlink(stagedPath)
        return manifest
    }

    private static func read(_ path: String) throws(PublishError) -> (SignedEnvelope, Manifest) {
        let bytes: [UInt8]
        do { bytes = try FileSystem.read(path) } catch { throw PublishError(.io, "cannot read \(path): \(error.message)", cause: error) }
        do {
            let envelope = try SignedManifest.decodeEnvelope(bytes)
            return (envelope, try Manifest(json: envelope.content))
        } catch {
            throw PublishError(.badInput, "\(path): \(error.message)", cause: error)
        }
    }
}
