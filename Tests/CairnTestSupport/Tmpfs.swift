import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A mounted tmpfs of `megabytes`, unmounted by `unmount()`.
public struct Tmpfs: Sendable {
    public let path: String

    public init(megabytes: Int) throws {
        try Tools.requireMount("mount a tmpfs")
        path = try TemporaryDirectory.make() + "/disk"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let mount = try Binaries.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", path], in: "/tmp")
        guard mount.status == 0 else { throw TestSkip("cannot mount a tmpfs (run the tests as root): \(mount.error)") }
    }

    public func remount(_ mode: String) throws {
        let run = try Binaries.run("/bin/mount", ["-o", "remount,\(mode)", path], in: "/tmp")
        guard run.status == 0 else { throw StepFailed("remount \(mode): \(run.error)") }
    }

    public func unmount() { _ = try? Binaries.run("/bin/umount", ["-l", path], in: "/tmp") }

    /// Grows a filler file until only `leave` bytes stay free (0: until the disk is full):
    /// one posix_fallocate for the bulk (instant on tmpfs), then writes for the rest.
    public func fill(leaving leave: Int64) {
        let fd = open(path + "/filler", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        defer { close(fd) }
        var info = statvfs()
        if statvfs(path, &info) == 0 {
            let bulk = Int64(info.f_bavail) * Int64(info.f_frsize) - leave - (1 << 20)
            if bulk > 0 { _ = posix_fallocate(fd, 0, off_t(bulk)) }
        }
        let block = [UInt8](repeating: 0xA5, count: 1 << 16)
        while true {
            var info = statvfs()
            guard statvfs(path, &info) == 0 else { return }
            let free = Int64(info.f_bavail) * Int64(info.f_frsize)
            let room = free - leave
            if room <= 0 { return }
            let n = min(Int(room), block.count)
            if block.withUnsafeBytes({ write(fd, $0.baseAddress, n) }) <= 0 { return }
        }
    }

    public func emptyFiller() { unlink(path + "/filler") }
}
