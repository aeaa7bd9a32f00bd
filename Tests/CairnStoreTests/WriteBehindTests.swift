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
            var behind = FileSystem.WriteBehind(from: 0, window: Int64(window))
            for start in stride(from: 0, to: total, by: piece) {
                let written = bytes[start..<start + piece].withUnsafeBytes { write(fd, $0.baseAddress!, piece) }
                try #require(written == piece)
                behind.wrote(upTo: Int64(start + piece), fd: fd)
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

    @Test("Given a resumed file, when WriteBehind starts at its length, then the bytes written before are left as they are", .enabled(if: PageCache.dropsPages, "the temporary folder keeps every page cached (tmpfs)"))
    func resumesAtItsOffset() throws {
        try withFile { path, page in
            let window = 8 * page, held = 4 * window
            try FileSystem.writeNew([UInt8](repeating: 1, count: held), to: path)
            let before = try #require(PageCache.residentPages(path))
            let fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)
            try #require(fd >= 0)
            var behind = FileSystem.WriteBehind(from: Int64(held), window: Int64(window))
            let more = [UInt8](repeating: 2, count: 4 * window)
            for index in 0..<4 {
                let written = more[index * window..<(index + 1) * window].withUnsafeBytes { write(fd, $0.baseAddress!, window) }
                try #require(written == window)
                behind.wrote(upTo: Int64(held + (index + 1) * window), fd: fd)
            }
            close(fd)
            let after = try #require(PageCache.residentPages(path))
            // What was cached of the first part stays cached; of the new part, the first two windows left.
            #expect(before.filter { $0 < held / page }.allSatisfy(after.contains))
            #expect((held / page..<(held + 2 * window) / page).filter(after.contains).isEmpty)
            let data = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
            #expect(data == [UInt8](repeating: 1, count: held) + more)
        }
    }

    /// Runs `body` with a path in a new temporary folder (removed afterwards) and the page size.
    func withFile(_ body: (String, Int) throws -> Void) throws {
        let folder = NSTemporaryDirectory() + "cairn-behind-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try body(folder + "/blob", Int(sysconf(Int32(_SC_PAGESIZE))))
    }
}
