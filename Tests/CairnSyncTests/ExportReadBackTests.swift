import CairnCore
import CairnStore
import CairnSync
import CairnTestSupport
import Foundation
import Testing

/// The read-back an export ends with, on real files. A disk that gives back other bytes than it
/// was given (a fake-capacity stick) cannot be made on the test machine (no device-mapper in
/// its kernel), so the bytes are changed on disk after the write instead: what the read-back
/// sees is the same.
@Suite("ExportReadBack: every exported file read back from the disk")
struct ExportReadBackTests {
    @Test("Given exported files read back unchanged, then the check passes; with one byte of one changed after the write, it fails with hash_mismatch naming that file; with one gone, io")
    func readBack() throws {
        let target = try TemporaryDirectory.make()
        let store = BlobStore(root: target)
        let blob = Array(repeating: UInt8(7), count: 3 << 20) + Array("end".utf8)
        let id = try store.put(blob)
        let manifest = target + "/channels/field/manifest.json"
        try FileSystem.makeDirectory(target + "/channels/field")
        try FileSystem.writeAtomically(Array("{}".utf8), to: manifest)
        let files = [(store.path(of: id), id), (manifest, ContentID(hashing: Array("{}".utf8)))]
        try ExportReadBack.check(files, in: target)

        // One byte in the middle of the blob, changed where the disk holds it.
        let handle = try #require(FileHandle(forUpdatingAtPath: store.path(of: id)))
        try handle.seek(toOffset: UInt64(blob.count / 2))
        try handle.write(contentsOf: Data([8]))
        try handle.close()
        #expect {
            try ExportReadBack.check(files, in: target)
        } throws: { error in
            let failure = error as? SyncError
            return failure?.code == .hashMismatch && failure?.message.hasPrefix(BlobStore.relativePath(of: id) + " read back from \(target) differs") == true
        }

        unlink(manifest)
        #expect {
            try ExportReadBack.check([files[1]], in: target)
        } throws: { error in
            (error as? SyncError)?.code == .io && (error as? SyncError)?.message.contains("cannot read channels/field/manifest.json back") == true
        }
    }
}
