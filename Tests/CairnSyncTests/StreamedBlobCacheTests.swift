import CairnStore
import CairnTestSupport
import Foundation
import Logging
import Testing
@testable import CairnSync

/// A full snapshot is hashed and inflated as it downloads (`SnapshotStream`, the download's
/// tap), and its blob is then kept for export: its pages leave the page cache behind the
/// download (`FileSystem.WriteBehind`), so that on a small device they do not push out the
/// pages of the index answering queries meanwhile. A blob read after its download (a delta, a
/// snapshot whose download resumed) keeps its pages.
@Suite("A streamed snapshot blob leaves the page cache behind its download", .offCooperativePool)
struct StreamedBlobCacheTests {
    final class Counting: DownloadTap, @unchecked Sendable {
        var bytes = 0
        func receive(_ bytes: UnsafeRawBufferPointer) { self.bytes += bytes.count }
    }

    @Test("Given a blob of two and a half windows downloaded through a tap, then every byte arrives and its first window is not in the page cache; downloaded without a tap, its first window stays cached", .enabled(if: PageCache.dropsPages, "the temporary folder keeps every page cached (tmpfs)"))
    func streamedBlob() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let window = Int(FileSystem.WriteBehind.window), page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let size = 2 * window + window / 2  // whole mebibytes
        let source = folder + "/source"
        // A pattern of a mebibyte, each copy marked with its number (so that a piece out of place shows).
        let pattern = (0..<1 << 20).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 9) }
        #expect(FileManager.default.createFile(atPath: source, contents: nil))
        let handle = try #require(FileHandle(forWritingAtPath: source))
        for piece in 0..<size >> 20 { handle.write(Data([UInt8(truncatingIfNeeded: piece)] + pattern.dropFirst())) }
        try handle.close()
        let downloader = Downloader(logger: Logger(label: "test"))

        let tap = Counting()
        _ = try await downloader.download(url: "file://" + source, to: folder + "/streamed", size: Int64(size), tap: tap, progress: nil)
        #expect(tap.bytes == size)
        let streamed = try #require(PageCache.residentPages(folder + "/streamed"))
        #expect((0..<window / page).filter(streamed.contains).isEmpty, "\(streamed.filter { $0 < window / page }.count) of the first window's \(window / page) pages and \(streamed.count) of \(size / page) in all are cached")
        // Read after the check: reading it brings its pages back.
        #expect(FileManager.default.contentsEqual(atPath: source, andPath: folder + "/streamed"))

        _ = try await downloader.download(url: "file://" + source, to: folder + "/read-later", size: Int64(size))
        let kept = try #require(PageCache.residentPages(folder + "/read-later"))
        #expect(!(0..<window / page).filter(kept.contains).isEmpty, "none of the first window's pages is cached")
    }
}
