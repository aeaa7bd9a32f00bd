import CairnClient
import CairnStore
import Foundation
import Synchronization

/// The daemon's socket file: refuses to steal a live one, replaces a stale one, applies the
/// configured mode and group once bound, and removes only its own file at shutdown.
final class SocketFile: Sendable {
    let path: String
    let mode: UInt32
    let groupID: gid_t?
    /// The inode this process bound, so shutdown never removes a successor's socket.
    private let boundInode: Mutex<ino_t?> = Mutex(nil)

    /// Checks the path and resolves the group; throws when another process serves the path.
    init(path: String, mode: UInt32, group: String?) throws(DaemonError) {
        guard path.utf8.count < 108 else {
            throw DaemonError(.socketSetup, "the socket path \(path) is longer than 107 bytes; choose a shorter --socket")
        }
        try Self.checkFolder(of: path)
        self.path = path
        self.mode = mode
        if let group {
            guard let gid = FileSystem.groupID(named: group) else {
                throw DaemonError(.badConfiguration, "socket_group names no group on this system")
            }
            // Only root, or a member, may give a file to a group: else the chown after bind would
            // fail and the group's members be refused, with cairnd answering no one it meant to.
            guard Self.mayGive(to: gid) else {
                throw DaemonError(.badConfiguration, "socket_group \(group): cairnd's user is not a member, so it cannot give the socket to that group; add the user to the group or run cairnd as root")
            }
            groupID = gid
        } else {
            groupID = nil
        }
        try Self.clearStale(path)
    }

    /// Whether this process may chown a file it owns to `group`: as root, or as a member.
    static func mayGive(to group: gid_t) -> Bool {
        if geteuid() == 0 || getegid() == group { return true }
        let count = getgroups(0, nil)
        guard count > 0 else { return false }
        var groups = [gid_t](repeating: 0, count: Int(count))
        let filled = getgroups(count, &groups)
        return filled > 0 && groups.prefix(Int(filled)).contains(group)
    }

    /// The folder the socket is created in must exist and let this process create files.
    static func checkFolder(of path: String) throws(DaemonError) {
        let folder = (path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent
        var info = stat()
        guard stat(folder, &info) == 0 else {
            let reason = String(cString: strerror(errno))
            throw DaemonError(.socketSetup, "cannot create the socket \(path): its folder \(folder) is missing (\(reason)); "
                              + "create it (mkdir -p \(folder)) or choose another --socket")
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw DaemonError(.socketSetup, "cannot create the socket \(path): \(folder) is not a folder; choose another --socket")
        }
        guard access(folder, W_OK | X_OK) == 0 else {
            let readOnly = errno == EROFS
            let reason = String(cString: strerror(errno))
            throw DaemonError(.socketSetup, "cannot create the socket \(path): no write access to \(folder) (\(reason)); "
                              + (readOnly ? "its file system is read-only: under the systemd unit, add the folder to ReadWritePaths=, or choose another --socket"
                                 : "run cairnd as a user who may write there or choose another --socket"))
        }
    }

    /// Nothing at `path`: fine. A socket nobody answers on (left by a crash): removed. A socket
    /// that accepts a connection: another daemon serves it, refuse. Anything else: refuse.
    static func clearStale(_ path: String) throws(DaemonError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard (info.st_mode & S_IFMT) == S_IFSOCK else {
            throw DaemonError(.socketInUse, "\(path) exists and is not a socket; remove it or choose another --socket")
        }
        switch UnixSocket.probe(path) {
        case .accepting:
            throw DaemonError(.socketInUse, "another process is serving the socket \(path); stop it first or choose another --socket")
        case .refused:
            guard unlink(path) == 0 || errno == ENOENT else {
                throw DaemonError(.socketSetup, "cannot remove the stale socket \(path): \(String(cString: strerror(errno)))")
            }
        case .failed(let code):
            throw DaemonError(.socketSetup, "cannot check the existing socket \(path): \(String(cString: strerror(code)))")
        }
    }

    private let listening = Mutex(false)

    /// Whether the server has bound and listens on the path.
    var isListening: Bool { listening.withLock { $0 } }
    func markListening() { listening.withLock { $0 = true } }

    /// After bind: the configured mode and group; remembers the inode. Returns an error
    /// message when they cannot be applied.
    func didBind() -> String? {
        var info = stat()
        if lstat(path, &info) == 0 { boundInode.withLock { $0 = info.st_ino } }
        if chmod(path, mode_t(mode)) != 0 { return "cannot set the socket's mode: \(String(cString: strerror(errno)))" }
        if let groupID, chown(path, uid_t.max, groupID) != 0 {
            return "cannot set the socket's group: \(String(cString: strerror(errno)))"
        }
        return nil
    }

    /// Removes the socket file if it is still the one this process bound.
    func remove() {
        guard let inode = boundInode.withLock({ $0 }) else { return }
        var info = stat()
        if lstat(path, &info) == 0, info.st_ino == inode { unlink(path) }
    }
}
