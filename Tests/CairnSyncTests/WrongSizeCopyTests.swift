import CairnTestSupport
import Foundation
import Logging
import Testing
@testable import CairnSync

/// A mirror whose copy of a blob is not the signed size (cut short on its way in) while the
/// device holds part of the blob from another source: the copy is refused and the bytes held
/// are kept, rather than thrown away to fail again from zero. A real HTTP server
/// (`fault_server.py`) serves the short and the long copy with its ranges.
@Suite("A source's copy of another size than signed", .offCooperativePool)
struct WrongSizeCopyTests {
    /// A blob's bytes, up to its longest copy's 1,200 (the signed blob is the first 1,000).
    static let blob = (0..<1_200).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }

    /// `folder/blob.partial`, holding the blob's first 600 bytes (from another source).
    static func heldPartial(in folder: String) throws -> String {
        let partial = folder + "/blob.partial"
        try Data(blob.prefix(600)).write(to: URL(fileURLWithPath: partial))
        return partial
    }

    @Test("Given 600 bytes of a 1,000-byte blob held and a source whose copy is 400, 800 or 1,200 bytes, when the download resumes there, then it is refused as a copy of another size, nothing of it written and the 600 bytes kept; from a source with the whole blob, it completes",
          arguments: [400, 800, 1_200])
    func heldBytesKept(copySize: Int) async throws {
        let folder = try TemporaryDirectory.make()
        let blob = Self.blob
        let (short, whole) = (folder + "/short", folder + "/whole")
        for (root, bytes) in [(short, Array(blob.prefix(copySize))), (whole, Array(blob.prefix(1_000)))] {
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            try Data(bytes).write(to: URL(fileURLWithPath: root + "/blob"))
        }
        let partial = try Self.heldPartial(in: folder)
        let mirror = try FaultServer(root: short)
        defer { mirror.stop() }
        let downloader = Downloader(logger: Logger(label: "test"))

        await #expect {
            _ = try await downloader.download(url: mirror.url + "/blob", to: partial, size: 1_000)
        } throws: { error in
            let failure = error as? SyncError
            return failure?.cause is Downloader.WrongSize
                && failure?.message.contains("copy of the blob is \(copySize) bytes, not the 1000 signed") == true
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: partial)) == Data(blob.prefix(600)))

        let origin = try FaultServer(root: whole)
        defer { origin.stop() }
        _ = try await downloader.download(url: origin.url + "/blob", to: partial, size: 1_000)
        #expect(try Data(contentsOf: URL(fileURLWithPath: partial)) == Data(blob.prefix(1_000)))
        #expect(origin.requests.map(\.range) == ["bytes=600-"], "\(origin.requests)")
    }

    @Test("Given 600 bytes of a 1,000-byte blob held and a stick (file://) whose copy is 400 or 1,200 bytes, when the download resumes there, then it is refused as a copy of another size with nothing of it written, and the 600 bytes are kept",
          arguments: [400, 1_200])
    func stickCopyOfAnotherSize(copySize: Int) async throws {
        let folder = try TemporaryDirectory.make()
        let blob = Self.blob
        try Data(blob.prefix(copySize)).write(to: URL(fileURLWithPath: folder + "/blob"))
        let partial = try Self.heldPartial(in: folder)
        await #expect {
            _ = try await Downloader(logger: Logger(label: "test")).download(url: "file://" + folder + "/blob", to: partial, size: 1_000)
        } throws: { error in
            (error as? SyncError)?.cause is Downloader.WrongSize
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: partial)) == Data(blob.prefix(600)))
    }
}
