import CairnCore
import CairnIndex
import CairnSearch
import CairnStore
import Foundation
import Logging

/// Turns a channel's signed manifest into a searchable version, the way a device installs one
/// but from the repository's own files: verify the signature, check each blob's SHA-256 and
/// size, inflate the snapshot into the cache folder, verify it against the manifest's state
/// root, copy the model files beside it, and open both with the daemon's engine.
///
/// Cache layout: `<cache>/<channel>/<version>-<state root>/index.sqlite` and
/// `<cache>/models/<Manifest.Model.folderName>/<file>`. A folder appears under its final name only
/// once complete and verified (built as `.partial-*`, then renamed), so a later start reuses it.
struct VersionCache: Sendable {
    let repository: String
    let folder: String
    /// The configured key files; empty: the keys under `<repo>/keys/`.
    let trustedKeyFiles: [String]
    /// The pinned root file, when set: the chain from it through `<repo>/root/` decides.
    let trustedRootFile: String?
    let logger: Logger

    /// Creates the cache folder (mode 0700) and checks that this user owns it.
    init(repository: String, folder: String, trustedKeyFiles: [String], trustedRootFile: String? = nil,
         logger: Logger) throws(ServerError) {
        self.repository = repository
        self.folder = folder
        self.trustedKeyFiles = trustedKeyFiles
        self.trustedRootFile = trustedRootFile
        self.logger = logger
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                 attributes: [.posixPermissions: 0o700])
        var info = stat()
        guard stat(folder, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == getuid() else {
            throw ServerError(.configurationInvalid, "search cache \(folder) is not a folder this user owns; set search_cache")
        }
        // Another local user able to write there could plant a verified-looking version folder.
        guard info.st_mode & 0o022 == 0 else {
            throw ServerError(.configurationInvalid, "search cache \(folder) is writable by group or others; chmod 700 it or set search_cache")
        }
        _ = try signingPolicy()
        Self.removeAbandoned(in: folder)
    }

    /// Removes `.partial-*` folders (a channel's or the models') a killed build left a day or
    /// more ago: each may hold a whole inflated snapshot. Younger ones may be another server's,
    /// sharing the cache, still building.
    static func removeAbandoned(in folder: String, before: Date = Date(timeIntervalSinceNow: -86_400)) {
        for parent in ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).map({ folder + "/" + $0 }) {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? [] where name.hasPrefix(".partial-") {
                let path = parent + "/" + name
                guard let changed = (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date,
                      changed < before else { continue }
                try? FileManager.default.removeItem(atPath: path)
            }
        }
    }

    /// What manifests are checked against: with a pinned root, the policy of the newest root that
    /// chains from it through `<repo>/root/` (a root that does not chain ends the walk, logged);
    /// else the trusted keys with threshold 1.
    func signingPolicy() throws(ServerError) -> SigningPolicy {
        guard let trustedRootFile else { return SigningPolicy(keys: try trustedKeys()) }
        let pinned: [UInt8]
        do { pinned = try FileSystem.read(trustedRootFile) } catch {
            throw ServerError(.configurationInvalid, "cannot read search_trusted_root \(trustedRootFile): \(error.reason)")
        }
        var chain: TrustChain
        do { chain = try TrustChain(pinned: pinned) } catch {
            throw ServerError(.configurationInvalid, "search_trusted_root \(trustedRootFile): \(error.message)")
        }
        while let next = FileManager.default.contents(atPath: repository + "/root/\(chain.current.version + 1).root.json") {
            do { try chain.accept(next: Array(next)) } catch {
                logger.warning("online search: a root does not chain; keeping the one before it",
                               metadata: ["cairn.search.root": "\(chain.current.version + 1)", "cairn.error": "\(error)"])
                break
            }
        }
        return chain.policy
    }

    /// The public keys manifests must be signed with.
    func trustedKeys() throws(ServerError) -> [PublicKey] {
        let files = trustedKeyFiles.isEmpty
            ? ((try? FileManager.default.contentsOfDirectory(atPath: repository + "/keys")) ?? [])
                .filter { $0.hasSuffix(".pub") }.sorted().map { repository + "/keys/" + $0 }
            : trustedKeyFiles
        var keys: [PublicKey] = []
        for file in files {
            do {
                let bytes: [UInt8]
                do { bytes = try FileSystem.read(file) } catch {
                    throw ServerError(.configurationInvalid, "cannot read trusted key \(file): \(error.reason)")
                }
                guard let text = String(validating: bytes, as: UTF8.self) else {
                    throw ServerError(.configurationInvalid, "trusted key \(file) is not a public key file (not UTF-8 text)")
                }
                keys.append(try PublicKey(fileText: text))
            } catch let error as ServerError {
                if !trustedKeyFiles.isEmpty { throw error }
            } catch {
                if !trustedKeyFiles.isEmpty { throw ServerError(.configurationInvalid, "trusted key \(file): \(error)") }
            }
        }
        return keys
    }

    /// The version the manifest bytes describe, opened for search.
    /// - Parameter reusing: the version serving now, whose model is reused when unchanged.
    func load(channel: String, manifestBytes: [UInt8], reusing: ServingVersion?) throws(ServerError) -> ServingVersion {
        let manifest: Manifest
        do { manifest = try SignedManifest.decodeAndVerify(manifestBytes, policy: try signingPolicy()) } catch let error as CoreError {
            throw ServerError(.versionUnusable, "channel \(channel)'s manifest is refused: \(error.message)", cause: error)
        } catch {
            throw ServerError(.versionUnusable, "channel \(channel): \(error)")
        }
        guard manifest.channel == channel else {
            throw ServerError(.versionUnusable, "channel \(channel)'s manifest names channel \(manifest.channel)")
        }
        let indexFolder = try snapshotFolder(manifest)
        let modelFolder = try self.modelFolder(manifest)
        let index: SearchIndex
        do { index = try SearchIndex(path: indexFolder + "/index.sqlite") } catch {
            throw ServerError(.versionUnusable, "version \(manifest.version) of \(channel) cannot be opened: \(error.message)", cause: error)
        }
        let embedder = ServingVersion.embedder(for: index, modelFolder: modelFolder, reusing: reusing, logger: logger)
        removeOtherVersions(channel: channel, keeping: [indexFolder, reusing?.directory].compactMap { $0 })
        return ServingVersion(index: index, embedder: embedder, manifest: manifestBytes, directory: indexFolder,
                              modelDirectory: embedder == nil ? nil : modelFolder)
    }

    /// `<cache>/<channel>/<version>-<state root>`, built and verified if absent.
    private func snapshotFolder(_ manifest: Manifest) throws(ServerError) -> String {
        let final = "\(folder)/\(manifest.channel)/\(manifest.version)-\(manifest.stateRoot.hex)"
        return try build(final, complete: { FileSystem.exists($0 + "/index.sqlite") }) { (partial) throws(ServerError) in
            let snapshot = manifest.snapshot
            // Hashed and inflated in one pass, a megabyte at a time: at a million chunks the blob
            // is 1.5 GB, which a whole read held in this process's memory.
            let blob = try self.blobPath(snapshot.sha256, size: snapshot.size)
            do throws(StoreError) {
                try Zlib.decompressFile(blob, sha256: snapshot.sha256, to: partial + "/index.sqlite", size: snapshot.uncompressedSize)
            } catch {
                throw error.code == .hashMismatch ? Self.corrupt(snapshot.sha256, error.message, cause: error)
                    : ServerError(.versionUnusable, "the snapshot of version \(manifest.version) fails verification: \(error)")
            }
            do {
                let meta = try Snapshot.verify(at: partial + "/index.sqlite", expectedStateRoot: manifest.stateRoot)
                guard meta.version == manifest.version, meta.channel == manifest.channel else {
                    throw ServerError(.versionUnusable, "the snapshot of version \(manifest.version) names another version or channel")
                }
            } catch let error as ServerError {
                throw error
            } catch {
                throw ServerError(.versionUnusable, "the snapshot of version \(manifest.version) fails verification: \(error)")
            }
        }
    }

    /// `<cache>/models/<Manifest.Model.folderName>`, copied from verified blobs if absent; nil
    /// when the manifest names no weights (lexical only).
    private func modelFolder(_ manifest: Manifest) throws(ServerError) -> String? {
        guard let name = manifest.model.folderName else { return nil }
        let final = "\(folder)/models/\(name)"
        // An incomplete one would leave this server answering lexical only for good.
        return try build(final, complete: manifest.model.isWhole(in:)) { (partial) throws(ServerError) in
            for file in manifest.model.files {
                let bytes = try self.blob(file.sha256, size: file.size)
                do { try FileSystem.writeAtomically(bytes, to: partial + "/" + file.name) } catch {
                    throw ServerError(.versionUnusable, "cannot write model file \(file.name) into the search cache", cause: error)
                }
            }
        }
    }

    /// The path of repository blob `id`, which must exist and hold `size` bytes (its SHA-256 is
    /// the reader's to check: `blob`, or `Zlib.decompressFile` as it inflates).
    private func blobPath(_ id: ContentID, size: Int) throws(ServerError) -> String {
        let path = BlobStore(root: repository).path(of: id)
        var info = stat()
        guard stat(path, &info) == 0 else { throw Self.corrupt(id, String(cString: strerror(errno))) }
        guard Int(info.st_size) == size else {
            throw ServerError(.versionUnusable, "blob \(id.hex.prefix(12))… is \(info.st_size) bytes, not the stated \(size)")
        }
        return path
    }

    /// The repository blob `id`, checked against its SHA-256 and `size`.
    private func blob(_ id: ContentID, size: Int) throws(ServerError) -> [UInt8] {
        _ = try blobPath(id, size: size)
        do { return try BlobStore(root: repository).get(id) } catch { throw Self.corrupt(id, error.message, cause: error) }
    }

    private static func corrupt(_ id: ContentID, _ why: String, cause: (any Error)? = nil) -> ServerError {
        ServerError(.versionUnusable, "blob \(id.hex.prefix(12))… is missing or corrupt: \(why)", cause: cause)
    }

    /// `final` when `complete` says it is whole; else fills a fresh `.partial-*` folder beside it
    /// with `fill` and renames that into place (another process may have won the race: its
    /// complete folder is as good; an incomplete one is replaced).
    private func build(_ final: String, complete: (String) -> Bool,
                       _ fill: (String) throws(ServerError) -> Void) throws(ServerError) -> String {
        if complete(final) { return final }
        let partial = "\((final as NSString).deletingLastPathComponent)/.partial-\(UUID().uuidString)"
        do { try FileSystem.makeDirectory(partial) } catch {
            throw ServerError(.versionUnusable, "cannot create \(partial) in the search cache: \(error.message)", cause: error)
        }
        defer { try? FileManager.default.removeItem(atPath: partial) }
        try fill(partial)
        if rename(partial, final) == 0 || complete(final) { return final }  // another process's complete folder won
        // An incomplete folder in the way (a file removed from it) is moved aside, not removed in
        // place: another load may be renaming its complete copy there at the same moment.
        let aside = "\((final as NSString).deletingLastPathComponent)/.partial-\(UUID().uuidString)"
        if rename(final, aside) == 0 { try? FileManager.default.removeItem(atPath: aside) }
        guard rename(partial, final) == 0 || complete(final) else {
            throw ServerError(.versionUnusable, "cannot rename \(partial) into place in the search cache")
        }
        return final
    }

    /// Removes the channel's cached versions other than `keeping` (queries still running on a
    /// removed one keep their open files).
    private func removeOtherVersions(channel: String, keeping: [String]) {
        let base = "\(folder)/\(channel)"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? []
        where !name.hasPrefix(".") && !keeping.contains(base + "/" + name) {
            try? FileManager.default.removeItem(atPath: base + "/" + name)
        }
    }
}
