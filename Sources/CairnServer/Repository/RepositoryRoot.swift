import CairnCore
import Foundation
import Logging
import Synchronization

/// The served folder, with the one rule that keeps everything else private: a path is served
/// only if its fully resolved form (`realpath`, so every symlink followed) lies under the
/// resolved root and has no dot-named component on the way. A symlink inside the root to a
/// servable file inside the root is therefore served; one that leads outside, or to a dotfile,
/// is not (404).
///
/// The root is resolved again at each request: a mirror updated by swapping a symlink
/// (`rsync` into a new folder, then `ln -sfn repo-2 /srv/repo`) serves the new folder at once,
/// as nginx does, instead of the one the link named at start-up. Only the first folder is walked
/// for private keys (at start-up): a walk of a large repository on the request path would stall
/// the server; a key's bytes are refused wherever they lie (`DocumentCache`).
struct RepositoryRoot: Sendable {
    /// The folder as configured, made absolute (the symlink, when it is one).
    let path: String
    /// Resolved roots seen (each said once in the log).
    private let checked: Checked
    private let logger: Logger

    private final class Checked: Sendable {
        let roots = Mutex<Set<String>>([])
    }

    /// Resolves `path` and checks that it is a readable folder holding no private key.
    /// - Throws: `ServerError.Code.repositoryInvalid` or `.privateKeyUnderRoot`.
    init(path: String, logger: Logger = Logger(label: "cairn.server")) throws(ServerError) {
        guard let resolved = Self.realPath(path) else {
            throw ServerError(.repositoryInvalid, "the repository folder \(path) does not exist or cannot be read; publish into it first (cairn-server publish --repo \(path)) or pass another --repo")
        }
        var info = stat()
        guard stat(resolved, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw ServerError(.repositoryInvalid, "the repository \(path) is not a folder; pass the repository folder with --repo")
        }
        if let key = Self.findPrivateKey(under: resolved) {
            throw ServerError(.privateKeyUnderRoot, "refusing to serve \(path): it contains a private signing key (\(key)); keep the key outside the served folder")
        }
        self.path = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        checked = Checked()
        checked.roots.withLock { _ = $0.insert(resolved) }
        self.logger = logger
    }

    /// The folder `path` names now, nil when it cannot be resolved.
    private func currentRoot() -> String? {
        guard let resolved = Self.realPath(path) else { return nil }
        if checked.roots.withLock({ $0.insert(resolved).inserted }) {
            logger.notice("the repository \(path) now names \(resolved); serving it")
        }
        return resolved
    }

    /// A served file: its resolved path and what `stat` says of it.
    struct Resolved: Sendable {
        var path: String
        var size: Int
        var modified: Int
        /// Device, inode, size, mtime and ctime in nanoseconds: changes whenever the file does.
        var identity: [Int]
    }

    /// The resolved regular file for a relative path, or nil if it must not be served.
    func resolve(_ relativePath: String) -> Resolved? {
        guard let root = currentRoot(), let real = Self.realPath(root + "/" + relativePath), real.hasPrefix(root + "/") else { return nil }
        let inside = real.dropFirst(root.count + 1)
        if inside.split(separator: "/").contains(where: { $0.hasPrefix(".") }) { return nil }
        var info = stat()
        guard stat(real, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        let mtime = Int(info.st_mtim.tv_sec) * 1_000_000_000 + Int(info.st_mtim.tv_nsec)
        let ctime = Int(info.st_ctim.tv_sec) * 1_000_000_000 + Int(info.st_ctim.tv_nsec)
        return Resolved(path: real, size: Int(info.st_size), modified: Int(info.st_mtim.tv_sec),
                        identity: [Int(info.st_dev), Int(info.st_ino), Int(info.st_size), mtime, ctime])
    }

    /// Why `relativePath` cannot be looked up when it is not simply absent: a folder on the way
    /// this server may not search (one made under umask 077 by another user: EACCES), a read
    /// error (EIO). Nil when it is not there (ENOENT, ENOTDIR, a name too long) or it resolves.
    func lookupFailure(_ relativePath: String) -> Int32? {
        guard let root = currentRoot() else { return nil }
        if let resolved = realpath(root + "/" + relativePath, nil) {
            free(resolved)
            return nil
        }
        let code = errno
        // A name too long is none the repository holds (any caller can ask for one).
        return [ENOENT, ENOTDIR, ENAMETOOLONG].contains(code) ? nil : code
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The relative path of the first regular file under `root` (dotfiles included, symlinks
    /// not followed) that starts with the private key tag, if any.
    static func findPrivateKey(under root: String) -> String? {
        let tag = Array(PublisherKey.fileTag.utf8)
        guard let walker = FileManager.default.enumerator(atPath: root) else { return nil }
        while let relative = walker.nextObject() as? String {
            let full = root + "/" + relative
            var info = stat()
            guard lstat(full, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size >= tag.count else { continue }
            if readPrefix(full, count: tag.count) == tag { return relative }
        }
        return nil
    }

    private static func readPrefix(_ path: String, count: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: count)
        let got = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, count) }
        return got == count ? bytes : nil
    }
}
