import CairnCore
import CairnTestSupport
import Foundation
import Testing
@testable import CairnStore

@Suite("zlib with size caps")
struct ZlibTests {
    let text = Array(String(repeating: "Boil water for one full minute before drinking it. ", count: 400).utf8)

    @Test("Given bytes, when compressed and decompressed with their size, then they round-trip and shrink")
    func roundTrip() throws {
        let compressed = try Zlib.compress(text)
        #expect(compressed.count < text.count / 10)
        #expect(try Zlib.decompress(compressed, expectedSize: text.count) == text)
    }

    @Test("Given a stream that inflates past its stated size (a bomb), when decompressed, then it stops at the cap")
    func bombIsRefused() throws {
        let bomb = try Zlib.compress([UInt8](repeating: 0, count: 50_000_000))
        var seen = 0
        #expect(throws: StoreError(.sizeLimitExceeded, "zlib stream inflates past its stated size of 1000000 bytes")) {
            try Zlib.decompress(bomb, limit: 1_000_000) { seen += $0.count }
        }
        #expect(seen <= 1_000_000)
    }

    @Test("Given a truncated, bit-flipped or padded stream, when decompressed, then it is refused as corrupt")
    func corruptStreams() throws {
        let compressed = try Zlib.compress(text)
        var flipped = compressed
        flipped[flipped.count / 2] ^= 0x10
        for bad in [Array(compressed.prefix(compressed.count / 2)), flipped, compressed + [0], Array("not zlib".utf8)] {
            do {
                _ = try Zlib.decompress(bad, expectedSize: text.count)
                Issue.record("a corrupt stream was accepted")
            } catch {
                #expect(error.code == .corruptStream)
            }
        }
    }

    @Test("Given a stream shorter than stated, when decompressed with expectedSize, then it is refused")
    func shortOutput() throws {
        let compressed = try Zlib.compress(text)
        #expect(throws: StoreError.self) { try Zlib.decompress(compressed, expectedSize: text.count + 1) }
    }
}

@Suite("content-addressed blob store")
struct BlobStoreTests {
    func temporaryRoot() throws -> String {
        try TemporaryDirectory.make()
    }

    @Test("Given bytes, when put, then they live under blobs/sha256/<ab>/<hash> and read back verified")
    func putAndGet() throws {
        let store = BlobStore(root: try temporaryRoot())
        let bytes = Array("snapshot bytes".utf8)
        let id = try store.put(bytes)
        #expect(id == ContentID(hashing: bytes))
        #expect(store.path(of: id).hasSuffix("blobs/sha256/\(id.hex.prefix(2))/\(id.hex)"))
        #expect(try store.get(id) == bytes)
        #expect(try store.put(bytes) == id)
    }

    @Test("Given a blob changed on disk, when read, then it is refused as a hash mismatch")
    func corruptBlob() throws {
        let store = BlobStore(root: try temporaryRoot())
        let id = try store.put(Array("original".utf8))
        try Data("tampered".utf8).write(to: URL(fileURLWithPath: store.path(of: id)))
        #expect(throws: StoreError.self) { try store.get(id) }
    }

    @Test("Given an atomic write, when it lands, then no temporary file is left beside it")
    func atomicWriteLeavesNoTemporary() throws {
        let root = try temporaryRoot()
        try FileSystem.writeAtomically(Array("one".utf8), to: root + "/file")
        try FileSystem.writeAtomically(Array("two".utf8), to: root + "/file")
        #expect(try FileSystem.read(root + "/file") == Array("two".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: root) == ["file"])
    }
}

@Suite("copying a file")
struct CopyFileTests {
    @Test("Given a copy asked to stop, when it is, then it fails and leaves no destination; unasked, it copies every byte")
    func stopping() throws {
        try withTestFolder { folder in
            let bytes = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            try FileSystem.writeNew(bytes, to: folder + "/source")
            var asked = 0
            #expect(throws: StoreError.self) {
                try FileSystem.copyFile(from: folder + "/source", to: folder + "/stopped", stopping: { asked += 1; return true })
            }
            #expect(asked == 1 && !FileSystem.exists(folder + "/stopped"))
            try FileSystem.copyFile(from: folder + "/source", to: folder + "/copy", stopping: { false })
            #expect(try FileSystem.read(folder + "/copy") == bytes)
        }
    }
}

@Suite("creating a file that must be new")
struct CreateAtomicallyTests {
    @Test("Given a file already at the path (another publisher's, written meanwhile), then createAtomically fails with EEXIST, keeps its bytes and leaves no temporary file; at a new path it writes the bytes")
    func neverReplaces() throws {
        try withTestFolder { folder in
            try FileSystem.createAtomically([1, 2, 3], at: folder + "/7.json")
            #expect(try FileSystem.read(folder + "/7.json") == [1, 2, 3])
            do {
                try FileSystem.createAtomically([9, 9], at: folder + "/7.json")
                Issue.record("an existing file was replaced")
            } catch {
                #expect((error as? StoreError)?.errno == EEXIST, "\(error)")
            }
            #expect(try FileSystem.read(folder + "/7.json") == [1, 2, 3])
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["7.json"])
        }
    }
}

@Suite("reading a whole file")
struct ReadWholeFileTests {
    @Test("Given a regular file and a pipe (whose size says 0, as --trusted-root <(…) gives), when read whole, then every byte comes back from each; an empty file reads as no bytes")
    func regularFileAndPipe() throws {
        let folder = try TemporaryDirectory.make()
        let data = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try FileSystem.writeAtomically(data, to: folder + "/file")
        #expect(try FileSystem.read(folder + "/file") == data)
        try FileSystem.writeAtomically([], to: folder + "/empty")
        #expect(try FileSystem.read(folder + "/empty") == [])

        let pipe = folder + "/pipe"
        #expect(mkfifo(pipe, 0o600) == 0)
        // The writer blocks in open until the reader opens the pipe. Its SIGPIPE is blocked, so
        // a read that stops early fails this test rather than the process; it ends with the test.
        let finished = DispatchSemaphore(value: 0)
        let writer = Thread {
            defer { finished.signal() }
            var pipeSignal = sigset_t()
            sigemptyset(&pipeSignal)
            sigaddset(&pipeSignal, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
            let fd = open(pipe, O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { return }
            defer { close(fd) }
            var offset = 0
            while offset < data.count {
                let written = data[offset...].withUnsafeBytes { write(fd, $0.baseAddress, min($0.count, 4096)) }
                guard written > 0 else { return }
                offset += written
            }
        }
        writer.start()
        defer {
            // A writer still waiting in open (the read failed before opening) is let through,
            // and its writes then fail (EPIPE; SIGPIPE is blocked) rather than fill the pipe.
            let unblock = open(pipe, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
            if unblock >= 0 { close(unblock) }
            _ = finished.wait(timeout: .now() + 10)
        }
        #expect(try FileSystem.read(pipe) == data)
    }
}
