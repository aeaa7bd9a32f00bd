import CairnSync
import Testing

/// The checks `cairn export` makes before it writes: the FAT case is judged from the file
/// system's type as mountinfo names it, since no FAT file system can be mounted on the test
/// machine (no vfat in its kernel); DiskFaultTests.exportFills runs the free-space refusal on a
/// real small file system.
@Suite("ExportRoom: a stick's file system judged before an export writes")
struct ExportRoomTests {
    static let mountinfo = """
        22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
        40 22 0:35 / /media rw shared:20 - tmpfs tmpfs rw
        41 40 8:17 / /media/USB\\040STICK rw,nosuid,nodev shared:21 - vfat /dev/sdb1 rw,fmask=0022
        42 40 8:33 / /media/big rw shared:22 - exfat /dev/sdc1 rw
        """

    @Test("Given mount points nested and with an escaped space, then a path's file system type is its longest mount point's")
    func mountTypes() {
        #expect(ExportRoom.mountType(of: "/media/USB STICK/cairn", mountinfo: Self.mountinfo) == "vfat")
        #expect(ExportRoom.mountType(of: "/media/USB STICK", mountinfo: Self.mountinfo) == "vfat")
        #expect(ExportRoom.mountType(of: "/media/USB", mountinfo: Self.mountinfo) == "tmpfs")
        #expect(ExportRoom.mountType(of: "/media/big/repo", mountinfo: Self.mountinfo) == "exfat")
        #expect(ExportRoom.mountType(of: "/home/field", mountinfo: Self.mountinfo) == "ext4")
        #expect(ExportRoom.mountType(of: "/x", mountinfo: "") == "")
    }

    @Test("Given a stick the kernel remounted read-only after errors (its mount's options still rw, its file system's ro), a read-only bind view of a writable file system, and a stick mounted ro, then each is read-only, and only the view is a view")
    func readOnlyMounts() {
        let mountinfo = """
            22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
            41 22 8:17 / /media/errors rw,nosuid shared:21 - vfat /dev/sdb1 ro,fmask=0022
            42 22 8:1 /srv /srv/export ro,relatime shared:22 - ext4 /dev/sda1 rw
            43 22 8:33 / /media/locked ro shared:23 - exfat /dev/sdc1 ro
            """
        func flags(_ path: String) -> [Bool] {
            let mount = ExportRoom.mount(of: path, mountinfo: mountinfo)
            return [mount.readOnly, mount.readOnlyView]
        }
        // Until 2026-12-07 only the mount's own options were read: the first was writable.
        #expect(flags("/media/errors/cairn") == [true, false])
        #expect(flags("/srv/export/cairn") == [true, true])
        #expect(flags("/media/locked") == [true, false])
        #expect(flags("/home/field") == [false, false])
    }

    @Test("Given a 5 GiB snapshot blob, then a FAT stick is refused with bad_path whatever its room, exFAT and ext4 take it; any file system with less free space than the blobs and small files is refused with disk_full")
    func problems() {
        let gib: Int64 = 1 << 30
        let fat = ExportRoom.problem(target: "/media/USB STICK/cairn", fileSystem: ("vfat", 64 * gib), files: [5 * gib, 90 << 20])
        #expect(fat?.code == .badPath && fat?.message.contains("FAT file system, which holds no file over 4 GiB") == true)
        #expect(ExportRoom.problem(target: "/s", fileSystem: ("vfat", 64 * gib), files: [3 * gib]) == nil)
        #expect(ExportRoom.problem(target: "/s", fileSystem: ("exfat", 64 * gib), files: [5 * gib]) == nil)
        #expect(ExportRoom.problem(target: "/s", fileSystem: ("ext4", 6 * gib), files: [5 * gib, 90 << 20]) == nil)
        let full = ExportRoom.problem(target: "/s", fileSystem: ("ext4", 5 * gib), files: [5 * gib])
        #expect(full?.code == .diskFull && full?.message.contains("nothing was written") == true)
        #expect(ExportRoom.problem(target: "/s", fileSystem: ("ext4", 100 + ExportRoom.smallFiles), files: [100]) == nil)
        #expect(ExportRoom.problem(target: "/s", fileSystem: ("ext4", 99 + ExportRoom.smallFiles), files: [100])?.code == .diskFull)
    }

    @Test("Given a target under /media, /mnt or /run/media, then it is refused as bad_path when its mount point is above that folder (no stick mounted) or is a folder of another file system bound there (systemd's ReadWritePaths=), and taken when a file system is mounted at the folder or below it; a target elsewhere is never judged so")
    func unmountedMedia() {
        let refused = ExportRoom.unmountedMediaProblem(target: "/media/usb/cairn", real: "/media/usb", mountPoint: "/")
        #expect(refused?.code == .badPath && refused?.message.contains("nothing is mounted at /media/usb/cairn") == true)
        #expect(ExportRoom.unmountedMediaProblem(target: "/run/media/field/STICK", real: "/run/media/field", mountPoint: "/run")?.code == .badPath)
        #expect(ExportRoom.unmountedMediaProblem(target: "/mnt/x", real: "/mnt", mountPoint: "/")?.code == .badPath)
        #expect(ExportRoom.unmountedMediaProblem(target: "/media/usb/cairn", real: "/media/usb", mountPoint: "/media/usb") == nil)
        #expect(ExportRoom.unmountedMediaProblem(target: "/mnt/cairn", real: "/mnt", mountPoint: "/mnt") == nil)
        #expect(ExportRoom.unmountedMediaProblem(target: "/mediafiles/x", real: "/mediafiles", mountPoint: "/") == nil)
        #expect(ExportRoom.unmountedMediaProblem(target: "/srv/export", real: "/srv", mountPoint: "/") == nil)
        // systemd's ReadWritePaths=-/media binds /media onto itself in cairnd's namespace: a mount
        // at the media folder, of a folder of the device's disk, is no stick (until 2026-12-07 the
        // export filled the device's disk under the shipped unit).
        let bound = ExportRoom.unmountedMediaProblem(target: "/media/usb/cairn", real: "/media", mountPoint: "/media", mountRoot: "/media")
        #expect(bound?.code == .badPath && bound?.message.contains("(/media bound at /media)") == true, "\(String(describing: bound))")
        #expect(ExportRoom.unmountedMediaProblem(target: "/media/usb/cairn", real: "/media/usb", mountPoint: "/media/usb", mountRoot: "/") == nil)
        // From mountinfo: the unit's binds are folders of the file system beneath (/media of "/",
        // /run/media of the /run tmpfs); a stick's btrfs subvolume, or a stick's folder bound
        // at /mnt/export, is a folder of another device: a stick.
        let lines = Self.mountinfo + "\n60 22 8:1 /media /media rw,relatime shared:1 - ext4 /dev/sda1 rw"
            + "\n61 60 0:50 /@data /media/stick rw shared:2 - btrfs /dev/sdd1 rw"
            + "\n70 22 0:25 / /run rw,nosuid shared:3 - tmpfs tmpfs rw"
            + "\n71 70 0:25 /media /run/media rw,nosuid shared:3 - tmpfs tmpfs rw"
            + "\n72 22 8:49 /exports /mnt/export rw shared:4 - vfat /dev/sde1 rw"
        #expect(ExportRoom.boundRoot(of: "/media/usb", mountinfo: lines) == "/media")
        #expect(ExportRoom.boundRoot(of: "/run/media/field/STICK", mountinfo: lines) == "/media")
        #expect(ExportRoom.boundRoot(of: "/media/stick/cairn", mountinfo: lines) == "/")
        #expect(ExportRoom.boundRoot(of: "/mnt/export/cairn", mountinfo: lines) == "/")
        #expect(ExportRoom.boundRoot(of: "/media/USB STICK", mountinfo: Self.mountinfo) == "/")
    }
}
