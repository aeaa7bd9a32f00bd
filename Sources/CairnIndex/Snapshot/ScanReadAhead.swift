import Foundation

extension Snapshot {
    /// Asks the kernel to read a snapshot file ahead of a pass over its rows in rowid order
    /// (`RowScan.part`), a window at a time (`posix_fadvise(POSIX_FADV_WILLNEED)`, which starts
    /// the reads and does not wait for them).
    ///
    /// An installed index's pages leave the page cache behind its inflation
    /// (`FileSystem.WriteBehind`), so the pass that checks the new version reads the file back
    /// from disk. It reads it through a mapping, a page at a time, and a page a row needs is often
    /// not the next one in the file (FTS5's pages lie between the rows'), so the kernel's own
    /// read-ahead keeps stopping. A snapshot written in rowid order lays its rows out in that
    /// order, so a part's place in its share of the file follows the share of its rows done
    /// (`Plan`). A file laid out otherwise (rows a delta moved) is read no more than once either
    /// way. The pages are the kernel's to evict, and it may drop a request under pressure: a hint.
    struct ReadAhead: ~Copyable {
        static let window: Int64 = 64 << 20
        /// Linux reads at most the device's read-ahead size (128 KiB by default) or its largest
        /// request per call, and drops the rest: the range is asked for in pieces of this size.
        static let piece: Int64 = 128 << 10
        private let fd: Int32
        private var plan: Plan

        /// For part `part` of `parts` equal shares of the file at `path`; nil when it cannot be
        /// opened (the pass reads it anyway and reports that).
        init?(path: String, part: Int, of parts: Int, window: Int64 = ReadAhead.window) {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            var info = stat()
            guard fstat(fd, &info) == 0, parts > 0 else {
                close(fd)
                return nil
            }
            let size = Int64(info.st_size)
            self.fd = fd
            plan = Plan(start: size * Int64(part) / Int64(parts), end: size * Int64(part + 1) / Int64(parts), window: window)
        }

        deinit { close(fd) }

        /// After `done` of the part's `rows` rows: asks for what `Plan.next` says.
        mutating func advance(done: Int, of rows: Int) {
            guard let range = plan.next(done: done, of: rows) else { return }
            #if os(Linux)
            for offset in stride(from: range.lowerBound, to: range.upperBound, by: Int(Self.piece)) {
                _ = posix_fadvise(fd, off_t(offset), off_t(min(Self.piece, range.upperBound - offset)), POSIX_FADV_WILLNEED)
            }
            #endif
        }

        /// Which bytes of a part's share of the file, `start..<end`, to ask for as its rows are
        /// done: those up to `window` past the estimate of where the rows done end, each once,
        /// and only once a quarter of a window is new (or the share's end is reached), so that
        /// at most a window is read ahead and memory does not grow with the file.
        struct Plan {
            let start: Int64, end: Int64, window: Int64
            /// The bytes before this offset were asked for.
            private(set) var requested: Int64

            init(start: Int64, end: Int64, window: Int64) {
                (self.start, self.end, self.window, requested) = (start, end, window, start)
            }

            mutating func next(done: Int, of rows: Int) -> Range<Int64>? {
                let position = start + (end - start) * Int64(min(max(0, done), rows)) / Int64(max(1, rows))
                let target = min(end, position + window)
                guard target - requested >= window / 4 || (target == end && requested < end) else { return nil }
                defer { requested = target }
                return requested..<target
            }
        }
    }
}
