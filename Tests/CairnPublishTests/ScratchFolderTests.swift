import CairnTestSupport
import Foundation
import Testing
@testable import CairnPublish
#if canImport(Glibc)
import Glibc
#endif

@Suite("Scratch folders of publishes and verifies")
struct ScratchFolderTests {
    /// Makes `parent/name`, optionally with an owner.lock that nobody holds (what a killed
    /// owner leaves: the kernel drops its flock), last modified `age` seconds ago.
    func plant(_ name: String, in parent: String, lockFile: Bool, age: TimeInterval) throws {
        let folder = parent + "/" + name
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data(repeating: 1, count: 4096).write(to: URL(fileURLWithPath: folder + "/snapshot-2.sqlite"))
        if lockFile { FileManager.default.createFile(atPath: folder + "/" + ScratchFolder.lockName, contents: nil) }
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-age)], ofItemAtPath: folder)
    }

    @Test("Given scratch folders of a live owner, a dead one, an old hidden one, a fresh hidden one and one without a lock, when a new one is made, then only the dead one's and the old hidden one are removed")
    func abandonedFoldersAreRemoved() async throws {
        let temporary = try TemporaryDirectory.make()
        let parent = ScratchFolder.parent(in: temporary)
        var livePath = ""
        do {
            let live = try ScratchFolder(in: temporary)
            livePath = live.path
            try plant("dead", in: parent, lockFile: true, age: 0)
            try plant(".old-hidden", in: parent, lockFile: true, age: 2 * ScratchFolder.hiddenAge)
            try plant(".being-made", in: parent, lockFile: true, age: 0)
            try plant("no-lock", in: parent, lockFile: false, age: 2 * ScratchFolder.hiddenAge)

            let made = try ScratchFolder(in: temporary)
            let left = Set(try FileManager.default.contentsOfDirectory(atPath: parent))
            #expect(left == [(live.path as NSString).lastPathComponent, (made.path as NSString).lastPathComponent,
                             ".being-made", "no-lock"])
            #expect(FileManager.default.fileExists(atPath: live.path + "/" + ScratchFolder.lockName))
            made.remove()
            withExtendedLifetime(live) {}
        }
        // Its owner is gone (the value, and with it the lock): the folder is abandoned now. A
        // process that another suite spawns at that moment holds a copy of the lock's descriptor
        // until its exec closes it (O_CLOEXEC), so the lock may stay taken that long.
        try await waitUntil("the gone owner's folder is removed") {
            ScratchFolder.removeAbandoned(in: parent)
            return !FileManager.default.fileExists(atPath: livePath)
        }
    }

    @Test("Given a scratch folder, when removed, then it and its files are gone")
    func removeDeletesTheFolder() throws {
        let temporary = try TemporaryDirectory.make()
        let folder = try ScratchFolder(in: temporary)
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: folder.path + "/file"))
        folder.remove()
        #expect(try FileManager.default.contentsOfDirectory(atPath: ScratchFolder.parent(in: temporary)) == [])
    }

    @Test("Given a temporary folder where the scratch folders' place is a symlink, when a scratch folder is made, then it is refused in one line and the symlink's target is untouched")
    func symlinkedParentIsRefused() throws {
        let temporary = try TemporaryDirectory.make()
        let target = temporary + "/elsewhere"
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        try Data([1]).write(to: URL(fileURLWithPath: target + "/keep"))
        try FileManager.default.createSymbolicLink(atPath: ScratchFolder.parent(in: temporary), withDestinationPath: target)
        #expect { try ScratchFolder(in: temporary) } throws: { error in
            let message = (error as? PublishError)?.message ?? ""
            return message.contains("is not a folder this user owns") && !message.contains("\n")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: target) == ["keep"])
    }
}
