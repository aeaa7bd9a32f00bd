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
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw PublishError(.io, "cannot open the lock file \(path): \(String(cString: strerror(errno)))") }
        // Clamped: a Duration of `inf` or 1e300 seconds traps.
        let deadline = ContinuousClock.now + .seconds(wait.isNaN ? 0 : min(max(wait, 0), 1e9))
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
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
        self.fd = fd
    }

    deinit {
        flock(fd, LOCK_UN)
        close(fd)
    }
}
