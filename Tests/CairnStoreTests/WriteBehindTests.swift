import Foundation
import Testing
import CairnTestSupport
@testable import CairnStore

@Suite("Pages of a file written once leave the page cache behind the writer")
struct WriteBehindTests {
    @Test("Given a file written front to back through WriteBehind, then the windows before the last two leave the page cache and every byte is on disk", .enabled(if: PageCache.dropsPages, "the temporary folder keeps every page cached (tmpfs)"))
    func dropsBehind() throws {
        try withFile { path, page in
            let window = 16 * page, piece = 4 * page, total = 12 * window
            let bytes = (0..<total).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) }
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            try #require(fd >= 0)
            var behind = FileSystem.WriteBehind(window: Int64(window))
            for start in stride(from: 0, to: total, by: piece) {
                let written = bytes[start..<start + piece].withUnsafeBytes { write(fd, $0.baseAddress!, piece) }
                try #require(written == piece)
                #expect(behind.wrote(upTo: Int64(start + piece), fd: fd) == 0)
            }
            close(fd)
            let resident = try #require(PageCache.residentPages(path))
            // The writer dropped every window but the last two: those pages are not cached, the
            // others (written last) still are.
            let dropped = (0..<(total - 2 * window) / page)
            #expect(dropped.filter(resident.contains).isEmpty, "\(resident.count) of \(total / page) pages cached")
            #expect(resident.contains(total / page - 1))
            #expect(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == bytes)
        }
    }

    /// Runs `body` with a path in a new temporary folder (removed afterwards) and the page size.
    func withFile(_ body: (String, Int) throws -> Void) throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try body(folder + "/blob", Int(sysconf(Int32(_SC_PAGESIZE))))
    }
}
