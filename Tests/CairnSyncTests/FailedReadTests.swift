import CairnTestSupport
import Foundation
import Logging
import Testing
@testable import CairnSync

/// What a start does with the file a failed mapped read named (`DIR/failed-read`). The SIGBUS
/// that writes the marker is produced for real in `DeviceFlowTests.failedReadOfMappedFileNamesIt`;
/// here the marker is written by the test, for the cases a real read error cannot be made for.
@Suite("The file a failed read named, at the next start")
struct FailedReadTests {
    @Test("Given a further channel's data directory inside the main one, when the marker names a rows file of it that two versions share, then both links go (the longest data directory holding the path is the one acted in) and the marker goes")
    func rowsFileOfAFurtherChannel() throws {
        let main = try TemporaryDirectory.make()
        let channel = main + "/channels/manuals"
        for version in ["1", "2"] {
            try FileManager.default.createDirectory(atPath: channel + "/versions/" + version, withIntermediateDirectories: true)
        }
        let rows = channel + "/versions/1/index.rows", shared = channel + "/versions/2/index.rows"
        try Data("rows".utf8).write(to: URL(fileURLWithPath: rows))
        #expect(link(rows, shared) == 0)
        let marker = main + "/failed-read"
        try Data(rows.utf8).write(to: URL(fileURLWithPath: marker))
        FailedRead.resolve(marker: marker, dataDirectories: [main, channel], logger: Logger(label: "cairn.sync.test"))
        #expect(!FileManager.default.fileExists(atPath: rows) && !FileManager.default.fileExists(atPath: shared))
        #expect(!FileManager.default.fileExists(atPath: marker))
    }

    @Test("Given the marker names a model file, then its folder is removed only when the file still does not read whole")
    func modelFolderOnlyWhenStillUnreadable() throws {
        let main = try TemporaryDirectory.make()
        let folder = main + "/models/m-1"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let weights = folder + "/model.safetensors"
        try Data(repeating: 7, count: 4096).write(to: URL(fileURLWithPath: weights))
        #expect(FailedRead.remove(weights, dataDirectories: [main]).contains("reads whole now"))
        #expect(FileManager.default.fileExists(atPath: weights))
        // A file that cannot be read (here a folder where the weights go: EISDIR, as a bad sector's EIO).
        try FileManager.default.removeItem(atPath: weights)
        try FileManager.default.createDirectory(atPath: weights, withIntermediateDirectories: false)
        #expect(FailedRead.remove(weights, dataDirectories: [main]).contains("removed its model folder"))
        #expect(!FileManager.default.fileExists(atPath: folder))
    }

    @Test("Given another process holding the data directory's lock (a cairnd running on it), when a second start finds the marker, then it acts on nothing: the rows file it names and the marker stay, for the cairnd that holds the directory")
    func heldDirectoryLeftAlone() throws {
        let main = try TemporaryDirectory.make()
        try FileManager.default.createDirectory(atPath: main + "/versions/1", withIntermediateDirectories: true)
        let rows = main + "/versions/1/index.rows"
        try Data("rows".utf8).write(to: URL(fileURLWithPath: rows))
        let marker = main + "/failed-read"
        try Data(rows.utf8).write(to: URL(fileURLWithPath: marker))
        // Held as a running cairnd holds it: its own open of DIR/lock.
        var running: DataDirectory? = try DataDirectory(path: main, logger: Logger(label: "cairn.sync.test"))
        FailedRead.resolve(marker: marker, dataDirectories: [main], logger: Logger(label: "cairn.sync.test"))
        #expect(FileManager.default.fileExists(atPath: rows) && FileManager.default.fileExists(atPath: marker))
        #expect(running != nil)
        running = nil
        // Once it is let go, the next start acts on it.
        FailedRead.resolve(marker: marker, dataDirectories: [main], logger: Logger(label: "cairn.sync.test"))
        #expect(!FileManager.default.fileExists(atPath: rows) && !FileManager.default.fileExists(atPath: marker))
    }
}
