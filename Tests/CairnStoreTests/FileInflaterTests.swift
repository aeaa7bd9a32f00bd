import CairnCore
import CairnTestSupport
import Foundation
import Testing
@testable import CairnStore

@Suite("zlib inflated into a file piece by piece")
struct FileInflaterTests {
    // Incompressible enough to span several of the inflater's 1 MiB output buffers.
    let data: [UInt8] = {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        return (0..<3_000_000).map { index in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return index % 3 == 0 ? UInt8(truncatingIfNeeded: state >> 33) : UInt8(ascii: "a") + UInt8(index % 7)
        }
    }()

    // More than the direct writer's three pieces of 4 MiB, and a short one: every piece is
    // written and taken again.
    let large: [UInt8] = (0..<FileSystem.DirectWriter.pieceSize * 4 + 12_345).map {
        UInt8(truncatingIfNeeded: $0 % 251 + $0 / 65_536)
    }

    /// Runs `body` with a path in a new temporary folder, removed afterwards.
    func withTemporaryPath(_ body: (String) throws -> Void) throws {
        let folder = NSTemporaryDirectory() + "cairn-inflate-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try body(folder + "/out")
    }

    /// Feeds `input` in pieces of `piece` bytes.
    func feed(_ inflater: Zlib.FileInflater, _ input: [UInt8], piece: Int) throws {
        for start in stride(from: 0, to: input.count, by: piece) {
            let slice = Array(input[start..<min(input.count, start + piece)])
            try slice.withUnsafeBytes { try inflater.feed($0) }
        }
    }

    @Test("Given a stream fed in pieces of any size, through the page cache or around it, when finished, then the file holds exactly the inflated bytes",
          arguments: [1, 4_096, 65_536, 10_000_000], [false, true])
    func piecesRoundTrip(piece: Int, bypassingCache: Bool) throws {
        let compressed = try Zlib.compress(data)
        try withTemporaryPath { path in
            let inflater = try Zlib.FileInflater(creating: path, size: data.count, bypassingCache: bypassingCache)
            try feed(inflater, compressed, piece: piece)
            try inflater.finish(durable: false)
            #expect(try FileSystem.read(path) == data)
        }
    }

    @Test("Given a bomb fed in pieces, when it passes the stated size, then it is refused and the file stays within it",
          arguments: [false, true])
    func bombStopsAtTheCap(bypassingCache: Bool) throws {
        let bomb = try Zlib.compress([UInt8](repeating: 0, count: 50_000_000))
        // Direct: past the writer's three pieces, so that writes are queued when it is refused.
        let size = bypassingCache ? 3 * FileSystem.DirectWriter.pieceSize + 1 : 1_000_000
        try withTemporaryPath { path in
            let inflater = try Zlib.FileInflater(creating: path, size: size, bypassingCache: bypassingCache)
            #expect { try feed(inflater, bomb, piece: 1_000) } throws: { ($0 as? StoreError)?.code == .sizeLimitExceeded }
            #expect(inflater.produced <= size)
            #expect(try FileSystem.read(path).count <= size)
        }
    }

    @Test("Given a direct stream refused part-way with writes still queued, when the inflater is dropped, then its queued writes are dropped before its file is closed and a file opened next is left alone")
    func droppedWithQueuedWrites() throws {
        let compressed = try Zlib.compress(large)
        try withTemporaryPath { path in
            do {
                // Stated one byte short: refused at the very end, with every piece queued.
                let inflater = try Zlib.FileInflater(creating: path, size: large.count - 1, bypassingCache: true)
                #expect { try feed(inflater, compressed, piece: 1 << 20) } throws: { ($0 as? StoreError)?.code == .sizeLimitExceeded }
            }
            // The dropped inflater's descriptor number is free again: a write queued past its
            // close would land here.
            let other = path + ".other"
            try FileSystem.writeAtomically([7, 7, 7], to: other)
            let fd = open(other, O_RDWR)
            defer { close(fd) }
            let written = try FileSystem.read(path).count
            #expect(written <= large.count - 1 && written % 4096 == 0)
            #expect(try FileSystem.read(other) == [7, 7, 7])
        }
    }

    @Test("Given a truncated, padded or short stream, when fed and finished, then it is refused as corrupt",
          arguments: [false, true])
    func corruptStreamsAreRefused(bypassingCache: Bool) throws {
        let compressed = try Zlib.compress(data)
        for (input, size) in [(Array(compressed.prefix(compressed.count / 2)), data.count), (compressed + [0], data.count),
                              (compressed, data.count + 1)] {
            try withTemporaryPath { path in
                let inflater = try Zlib.FileInflater(creating: path, size: size, bypassingCache: bypassingCache)
                #expect { try feed(inflater, input, piece: 65_536); try inflater.finish(durable: false) } throws: {
                    ($0 as? StoreError)?.code == .corruptStream
                }
            }
        }
    }

    @Test("Given a file that exists, when an inflater is created there, then it refuses and keeps the file")
    func existingFileIsKept() throws {
        try withTemporaryPath { path in
            try FileSystem.writeAtomically([1, 2, 3], to: path)
            #expect(throws: StoreError.self) { try Zlib.FileInflater(creating: path, size: 10) }
            #expect(try FileSystem.read(path) == [1, 2, 3])
        }
    }

    @Test("Given an inflater writing behind, when a stream is inflated, then its pages before the last two writes leave the page cache and the file holds exactly the inflated bytes", .enabled(if: PageCache.dropsPages, "the temporary folder keeps every page cached (tmpfs)"))
    func writesBehind() throws {
        let compressed = try Zlib.compress(data)
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        try withTemporaryPath { path in
            // Where the file system offers no direct I/O.
            let inflater = try Zlib.FileInflater(creating: path, size: data.count, directIO: false,
                                                 behind: FileSystem.WriteBehind(window: Int64(16 * page)))
            try feed(inflater, compressed, piece: 65_536)
            try inflater.finish(durable: false)
            let resident = try #require(PageCache.residentPages(path))
            // The inflater writes a megabyte at a time; the windows before the last two writes
            // were dropped, the last ones (written last) are still cached.
            let dropped = 0..<(data.count - 2 * (1 << 20)) / page
            #expect(!dropped.isEmpty && dropped.filter(resident.contains).isEmpty, "\(resident.count) of \(data.count / page) pages cached")
            #expect(resident.contains((data.count - 1) / page))
            #expect(try FileSystem.read(path) == data)
        }
        // Without it, the same inflation leaves its pages cached.
        try withTemporaryPath { path in
            let inflater = try Zlib.FileInflater(creating: path, size: data.count)
            try feed(inflater, compressed, piece: 65_536)
            try inflater.finish(durable: false)
            #expect(try #require(PageCache.residentPages(path)).contains(0))
        }
    }

    /// Whether the temporary folder's file system offers direct I/O (not tmpfs on older kernels).
    static let takesDirectIO: Bool = {
        let path = NSTemporaryDirectory() + "cairn-direct-probe-" + UUID().uuidString
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        guard fd >= 0 else { return false }
        defer { close(fd); unlink(path) }
        return FileSystem.DirectWriter(fd: fd, path: path) != nil
    }()

    @Test("Given an inflater bypassing the cache on a file system with direct I/O, when a stream of several pieces and a short one is inflated, then no page of the file is cached and it holds exactly the inflated bytes",
          .enabled(if: Self.takesDirectIO, "the temporary folder's file system offers no direct I/O"))
    func writesDirect() throws {
        let compressed = try Zlib.compress(large)
        try withTemporaryPath { path in
            let inflater = try Zlib.FileInflater(creating: path, size: large.count, bypassingCache: true)
            #expect(inflater.isDirect)
            try feed(inflater, compressed, piece: 65_536)
            try inflater.finish(durable: true)
            let resident = try #require(PageCache.residentPages(path))
            #expect(resident.count == 0, "pages of the file cached")
            #expect(try FileSystem.read(path) == large)
        }
    }

    @Test("Given a blob file and its hash, when inflated into a file around the page cache, then the file holds exactly the inflated bytes; a blob whose hash differs, or that is corrupt, is refused and its output removed")
    func blobFile() throws {
        let compressed = try Zlib.compress(large)
        try withTemporaryPath { path in
            let blob = path + ".blob"
            defer { unlink(blob) }
            try FileSystem.writeAtomically(compressed, to: blob)
            try Zlib.decompressFile(blob, sha256: ContentID(hashing: compressed), to: path, size: large.count,
                                    bypassingCache: true)
            #expect(try FileSystem.read(path) == large)
            unlink(path)
            // The whole blob is inflated before its hash is known: its pieces are written, then refused.
            #expect { try Zlib.decompressFile(blob, sha256: ContentID(hashing: [1]), to: path, size: large.count,
                                              bypassingCache: true) } throws: {
                ($0 as? StoreError)?.code == .hashMismatch
            }
            #expect(!FileSystem.exists(path))
            let truncated = Array(compressed.prefix(compressed.count / 2))
            try FileSystem.writeAtomically(truncated, to: blob)
            #expect { try Zlib.decompressFile(blob, sha256: ContentID(hashing: truncated), to: path, size: large.count,
                                              bypassingCache: true) } throws: {
                ($0 as? StoreError)?.code == .corruptStream
            }
            #expect(!FileSystem.exists(path))
        }
    }
}
