public import CairnCore
public import CairnStore
import Foundation

/// A repository's paths (protocol/repository.md), and reading what is already published —
/// every manifest checked against a trusted key, every blob against its hash.
public struct Repository: Sendable {
    public let root: String
    public let blobs: BlobStore

    public init(root: String) {
        self.root = root
        blobs = BlobStore(root: root)
    }

    public var keysFolder: String { root + "/keys" }
    public func channelFolder(_ channel: String) -> String { root + "/channels/" + channel }
    public func manifestPath(_ channel: String) -> String { channelFolder(channel) + "/manifest.json" }
    public func versionsFolder(_ channel: String) -> String { channelFolder(channel) + "/versions" }
    public func versionPath(_ channel: String, _ version: Int) -> String { versionsFolder(channel) + "/\(version).json" }

    /// `staged/<channel>`: manifests waiting for signatures (never served).
    public func stagedFolder(_ channel: String) -> String { root + "/staged/" + channel }
    /// `staged/<channel>/<n>.json`.
    public func stagedPath(_ channel: String, _ version: Int) -> String { stagedFolder(channel) + "/\(version).json" }

    /// The staged version numbers of `channel`, ascending.
    public func stagedVersions(_ channel: String) -> [Int] { numberedJSON(in: stagedFolder(channel)) }

    /// The channels that have a folder, sorted.
    public func channels() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: root + "/channels")) ?? [])
            .filter(Manifest.isValidChannelName).sorted()
    }

    /// The version numbers with a `versions/<n>.json` file, ascending.
    public func versionNumbers(_ channel: String) -> [Int] { numberedJSON(in: versionsFolder(channel)) }

    /// The `<n>` of every `<n>.json` in `folder`, ascending.
    func numberedJSON(in folder: String) -> [Int] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).compactMap { name in
            guard name.hasSuffix(".json"), let number = Int(name.dropLast(5)), number >= 1,
                  "\(number).json" == name else { return nil }
            return number
        }.sorted()
    }

    /// The public keys stored under `keys/` (written by each publish, for `verify`).
    public func storedKeys() -> [PublicKey] {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: keysFolder)) ?? []).filter { $0.hasSuffix(".pub") }.sorted()
        return names.compactMap { name in
            guard let text = try? String(contentsOfFile: keysFolder + "/" + name, encoding: .utf8) else { return nil }
            return try? PublicKey(fileText: text)
        }
    }

    /// The verified manifest in the file at `path`.
    public func manifest(at path: String, trustedKeys: [PublicKey]) throws(PublishError) -> Manifest {
        try manifest(at: path, trust: RepositoryTrust(roots: [], keys: trustedKeys))
    }

    /// The blob named `id`, checked against its hash and `size`.
    public func blob(_ id: ContentID, size: Int, what: String) throws(PublishError) -> [UInt8] {
        let bytes: [UInt8]
        do { bytes = try blobs.get(id) } catch {
            throw PublishError(.repositoryCorrupt, "\(what) blob \(BlobStore.relativePath(of: id)): \(error.message)", cause: error)
        }
        guard bytes.count == size else {
            throw PublishError(.repositoryCorrupt, "\(what) blob \(BlobStore.relativePath(of: id)) has \(bytes.count) bytes, the manifest says \(size)")
        }
        return bytes
    }

    /// The uncompressed snapshot of `manifest`, inflated into a new file at `path` a megabyte at
    /// a time (never held whole), its blob's hash and size checked on the way; inflation is
    /// capped at the manifest's uncompressed size.
    public func extractSnapshot(of manifest: Manifest, to path: String) throws(PublishError) {
        let what = "version \(manifest.version) snapshot"
        let id = manifest.snapshot.sha256
        let blob = blobs.path(of: id)
        guard Downloaded.size(blob) == manifest.snapshot.size else {
            throw PublishError(.repositoryCorrupt, "\(what) blob \(BlobStore.relativePath(of: id)) is missing or has another size than the manifest's \(manifest.snapshot.size) bytes")
        }
        // A blob this user cannot open (another user's publish under umask 077) is the
        // repository's problem, as before: that version is skipped. Only the scratch side fails
        // the publish (below).
        let input = open(blob, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else {
            throw PublishError(.repositoryCorrupt, "\(what) blob \(BlobStore.relativePath(of: id)) cannot be opened (\(String(cString: strerror(errno))))")
        }
        close(input)
        do {
            try Zlib.decompressFile(blob, sha256: id, to: path, size: manifest.snapshot.uncompressedSize)
        } catch where [.diskFull, .readOnly, .io].contains(error.code) && error.message.contains(path) {
            // Not the blob's fault: writing the scratch copy failed (the folder full, read-only,
            // a disk error; the message names the file it failed on). Taken for a corrupt blob,
            // it cost the version its deltas and its vectors, silently.
            throw PublishError(.scratchUnusable, "\(what): \(error.message) (the scratch folder is under TMPDIR; point TMPDIR at a disk with room)", cause: error)
        } catch {
            throw PublishError(.repositoryCorrupt, "\(what): \(error.message)", cause: error)
        }
    }
}

/// Sizes of files on disk.
enum Downloaded {
    /// The size of the regular file at `path`, or nil.
    static func size(_ path: String) -> Int? {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG ? Int(info.st_size) : nil
    }
}
