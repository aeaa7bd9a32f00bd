import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Names the file when a read of one of Cairn's mapped files fails.
///
/// cairnd maps its rows files and a delta's scratch file. When the kernel cannot give a page of
/// such a mapping (a disk's read error, or the file cut short by another process while mapped)
/// it sends SIGBUS, which kills the process with "Bus error" and nothing more. With the handler
/// (`nameFailedReads(program:)`), one line naming the file goes to standard error first; the
/// signal then ends the process as it would have (a supervisor restarts it; the data directory's
/// versions are untouched). The file is named by its path now (`/proc/self/map_files`: a version
/// folder is renamed after its rows file is mapped), else by the path it was mapped from. The
/// model's weights are covered too (`SafeTensors`: the encoder reads them from the mapping); not
/// SQLite's own maps, mapped by code that does not use this.
///
/// A bad sector stays bad: the next start would map the same file and stop on the same read,
/// and a supervisor would restart it for ever. So the handler also writes the file's path to a
/// marker file (`recordFailedReads(in:)`), which the next start reads (cairnd removes a rows
/// file, which it writes again from the index, or a model folder, which a sync fetches again).
///
/// The handler runs inside a signal: it only reads a fixed table of mappings and buffers made
/// beforehand, and calls `readlink`, `open`, `write`, `fsync`, `close`, `signal` and `pause`. A mapping forgotten while the
/// handler reads the table is at worst not named. Only the first failed read is named (an atomic
/// flag); any other thread that faults meanwhile waits in `pause` for the signal to end the
/// process.
public enum MappedFiles {
    static let capacity = 64
    static let pathSize = 1024

    struct Slot {
        /// The mapping's bounds, as the kernel sees them (the end rounded up to a page); `end`
        /// 0 marks a free slot.
        var start: UInt = 0
        var end: UInt = 0
        /// The length of the path it was mapped from, in `paths`.
        var pathLength = 0
    }

    /// The table, and each slot's path (`pathSize` bytes a slot), made once.
    nonisolated(unsafe) static let slots: UnsafeMutablePointer<Slot> = {
        let slots = UnsafeMutablePointer<Slot>.allocate(capacity: capacity)
        slots.initialize(repeating: Slot(), count: capacity)
        return slots
    }()
    nonisolated(unsafe) static let paths = buffer(capacity * pathSize)
    /// The handler's own: the `/proc/self/map_files/` name it completes (room for two
    /// addresses), and the path read from it.
    nonisolated(unsafe) static let procFolder = made("/proc/self/map_files/", room: 64)
    nonisolated(unsafe) static let currentPath = buffer(pathSize)
    /// The line's parts: "<program>: ", and what follows the path.
    nonisolated(unsafe) static let prefix = buffer(64)
    nonisolated(unsafe) static var prefixLength = 0
    nonisolated(unsafe) static let suffix = made(": a read of this mapped file failed (a disk error, or the file was cut short while mapped); stopping\n")
    nonisolated(unsafe) static let unnamed = made("a mapped file")
    /// Where the handler writes the failed file's path (NUL-terminated; empty: nowhere).
    nonisolated(unsafe) static let markerPath = buffer(pathSize)
    static let pageSize = UInt(sysconf(Int32(_SC_PAGESIZE)))
    private static let lock = NSLock()
    /// Taken by the first thread whose read fails (lock-free, so signal-safe).
    static let reporting = Atomic<Bool>(false)

    private static func buffer(_ count: Int) -> UnsafeMutablePointer<UInt8> {
        let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: count)
        bytes.initialize(repeating: 0, count: count)
        return bytes
    }

    /// A buffer of `room` bytes (at least `text`'s) that begins with `text`, and its length.
    private static func made(_ text: String, room: Int = 0) -> (bytes: UnsafeMutablePointer<UInt8>, count: Int) {
        let utf8 = Array(text.utf8)
        let bytes = buffer(max(room, utf8.count))
        bytes.update(from: utf8, count: utf8.count)
        return (bytes, utf8.count)
    }

    /// Remembers the mapping of `count` bytes at `start` as the file at `path`; the token is
    /// for `forget`. Nil when the table is full: the file is then not named.
    public static func remember(_ start: UnsafeRawPointer, count: Int, path: String) -> Int? {
        let bytes = Array(path.utf8.prefix(pathSize))
        return lock.withLock { () -> Int? in
            guard let index = (0..<capacity).first(where: { slots[$0].end == 0 }) else { return nil }
            (paths + index * pathSize).update(from: bytes, count: bytes.count)
            let address = UInt(bitPattern: start)
            let end = address + (UInt(count) + pageSize - 1) / pageSize * pageSize
            slots[index] = Slot(start: address, end: end, pathLength: bytes.count)
            return index
        }
    }

    /// Forgets a mapping before it is unmapped.
    public static func forget(_ token: Int?) {
        guard let token else { return }
        lock.withLock { slots[token] = Slot() }
    }

    /// Installs the SIGBUS handler, its lines begun with "`program`: " (once per process;
    /// later calls change nothing).
    public static func nameFailedReads(program: String) {
        lock.withLock {
            guard prefixLength == 0 else { return }
            let bytes = Array((program + ": ").utf8.prefix(64))
            prefix.update(from: bytes, count: bytes.count)
            prefixLength = bytes.count
        }
        _ = installed
    }

    /// Makes the handler write the path of a file whose read failed to `marker` (replaced each
    /// time), as well as naming it on standard error.
    public static func recordFailedReads(in marker: String) {
        let bytes = Array(marker.utf8.prefix(pathSize - 1))
        lock.withLock {
            markerPath.update(repeating: 0, count: pathSize)
            markerPath.update(from: bytes, count: bytes.count)
        }
    }

    /// Writes `count` bytes at `path` to the marker file, if there is one. Signal-safe.
    static func mark(_ path: UnsafePointer<UInt8>, count: Int) {
        guard markerPath.pointee != 0 else { return }
        let fd = markerPath.withMemoryRebound(to: CChar.self, capacity: pathSize) {
            open($0, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        }
        guard fd >= 0 else { return }
        _ = write(fd, path, count)
        _ = fsync(fd)
        _ = close(fd)
    }

    /// Writes `value` in lowercase hexadecimal at `at`, as the kernel names map_files; returns
    /// the position after it.
    static func hex(_ value: UInt, at: UnsafeMutablePointer<UInt8>) -> UnsafeMutablePointer<UInt8> {
        var digits = 1
        while digits < MemoryLayout<UInt>.size * 2, value >> (4 * UInt(digits)) != 0 { digits += 1 }
        for position in 0..<digits {
            let nibble = UInt8((value >> (4 * UInt(digits - 1 - position))) & 0xF)
            at[position] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
        }
        return at + digits
    }

    /// The line for a failed read at `address`, written to standard error. Signal-safe.
    static func report(_ address: UInt) {
        _ = write(2, prefix, prefixLength)
        for index in 0..<capacity {
            let slot = slots[index]
            guard slot.end != 0, slot.start <= address, address < slot.end else { continue }
            var cursor = hex(slot.start, at: procFolder.bytes + procFolder.count)
            cursor.pointee = UInt8(ascii: "-")
            cursor = hex(slot.end, at: cursor + 1)
            cursor.pointee = 0
            let length = procFolder.bytes.withMemoryRebound(to: CChar.self, capacity: 64) { name in
                currentPath.withMemoryRebound(to: CChar.self, capacity: pathSize) { readlink(name, $0, pathSize) }
            }
            if length > 0 {
                _ = write(2, currentPath, length)
                mark(currentPath, count: length)
            } else {
                _ = write(2, paths + index * pathSize, slot.pathLength)
                mark(paths + index * pathSize, count: slot.pathLength)
            }
            _ = write(2, suffix.bytes, suffix.count)
            return
        }
        _ = write(2, unnamed.bytes, unnamed.count)
        _ = write(2, suffix.bytes, suffix.count)
    }

    private static let installed: Bool = {
        // Made before the handler can run: it must not be the one to make them.
        _ = (slots, paths, procFolder, currentPath, prefix, suffix, unnamed, markerPath, pageSize)
        var action = sigaction()
        action.__sigaction_handler.sa_sigaction = { _, info, _ in
            // Only the first failed read is named. Threads reading one cut file fault together
            // (a hybrid query's lexical and dense halves), and with the handler reset on entry
            // a second fault ended the process while the first was still writing its line,
            // which was then cut after "cairnd: ". A later fault waits for the first to end it.
            guard MappedFiles.reporting.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else {
                while true { pause() }
            }
            MappedFiles.report(UInt(bitPattern: info?.pointee._sifields._sigfault.si_addr))
            // Back to the default: the read is retried when the handler returns, and the signal
            // then ends the process at once. (Not the Swift runtime's backtracer, which this
            // replaces for SIGBUS: with the process's threads busy it took seconds, or hung.)
            signal(SIGBUS, SIG_DFL)
        }
        action.sa_flags = SA_SIGINFO
        sigemptyset(&action.sa_mask)
        return sigaction(SIGBUS, &action, nil) == 0
    }()
}
