import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `flock(LOCK_EX)` on `<repo>/.publish.lock`, so that two publishes to one repository never
/// interleave. The kernel drops the lock when the holder dies, so a killed publish never
/// leaves the repository locked.
final class PublishLock {
    private let fd: Int32

    /// Takes the lock, retrying every 50 ms for up to `wait` seconds, then refusing.
    init(repository root: String, wait: Double) throws(PublishError) {
        let path = root + "/.publish.lock"
        guard let fd = Self.open(path) else { throw PublishError(.io, "cannot open the lock file \(path): \(String(cString: strerror(errno)))") }
        self.fd = try Self.lock(fd, path: path, operation: LOCK_EX, wait: wait)
    }

    /// A reader's lock (`LOCK_SH`): no publish runs while it is held, and readers do not wait for
    /// each other. In a repository this user cannot write (a read-only mirror, another user's
    /// folder), where no lock file can be made, it holds nothing (nil), and the reader goes on
    /// without one.
    static func reading(repository root: String, wait: Double) throws(PublishError) -> PublishLock? {
        let path = root + "/.publish.lock"
        guard let fd = open(path) else {
            guard errno == ENOENT else { throw PublishError(.io, "cannot open the lock file \(path): \(String(cString: strerror(errno)))") }
            return nil
        }
        return PublishLock(fd: try lock(fd, path: path, operation: LOCK_SH, wait: wait))
    }

    private init(fd: Int32) { self.fd = fd }

    /// The lock file, made if missing; opened for reading alone where this user may not write it
    /// (a second signer on the host, a read-only mirror): `flock` needs no write access. Nil
    /// with `errno` set when it cannot be opened.
    private static func open(_ path: String) -> Int32? {
        var fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        if fd < 0 && (errno == EROFS || errno == EACCES || errno == EPERM) { fd = Glibc.open(path, O_RDONLY | O_CLOEXEC) }
        return fd >= 0 ? fd : nil
    }

    /// `fd` locked with `operation`, retrying every 50 ms for up to `wait` seconds; closed when
    /// it cannot be.
    private static func lock(_ fd: Int32, path: String, operation: Int32, wait: Double) throws(PublishError) -> Int32 {
        // Clamped: a Duration of `inf` or 1e300 seconds traps.
        let deadline = ContinuousClock.now + .seconds(wait.isNaN ? 0 : min(max(wait, 0), 1e9))
        while flock(fd, operation | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                // ENOLCK (NFS without a lock service) and the like: trying again would not help.
                let reason = String(cString: strerror(errno))
                close(fd)
                throw PublishError(.io, "cannot lock \(path): \(reason) (file locks do not work on this file system; publish from a local folder and copy the repository)")
            }
            guard ContinuousClock.now < deadline else {
                close(fd)
                throw PublishError(.locked, "another publish holds \(path); try again when it has finished")
            }
            usleep(50_000)
        }
        return fd
    }

    deinit {
        flock(fd, LOCK_UN)
        close(fd)
    }
}
