public import CairnCore
import CairnStore
import Foundation

/// How Markdown and plain-text files are cut into chunks. The defaults suit a 256-token model
/// window: about 180 words (≈ 240 WordPiece tokens of English) per chunk, 30 of them repeated
/// from the previous chunk so that a sentence cut at a boundary is whole in one of the two.
public struct ChunkingOptions: Sendable, Hashable {
    /// Words a chunk aims for; paragraphs are kept whole when they fit. Default 180.
    public var targetWords: Int
    /// Words repeated at the start of the next chunk of the same file, at most half of
    /// `targetWords` (more would make nearly a chunk per word). Default 30.
    public var overlapWords: Int

    public init(targetWords: Int = 180, overlapWords: Int = 30) {
        self.targetWords = max(1, targetWords)
        self.overlapWords = min(max(0, overlapWords), self.targetWords / 2)
    }
}

/// Reads a knowledge-base source — a file or a folder walked recursively (sorted, dotfiles
/// skipped) — into chunks. The kind of a file comes from its extension: `.json` (an array of
/// records), `.jsonl` (one record per line), `.md` / `.markdown` / `.txt` (chunked text).
/// Other files are ignored. Records are Cairn chunks `{id, title, content, scenario?, tags?,
/// source?}` or BEIR documents `{_id, title?, text, metadata?}`.
public enum SourceReader {
    /// The extensions read, lowercase, without the dot.
    public static let extensions: Set<String> = ["json", "jsonl", "md", "markdown", "txt"]

    /// Every chunk of the source, in file order then record order; ids unique across files.
    /// - Throws: `PublishError` `.badInput` naming the file, the record and what is wrong, or
    ///   `.io` when the source cannot be read.
    public static func read(path: String, chunking: ChunkingOptions = ChunkingOptions()) throws(PublishError) -> [Chunk] {
        var chunks: [Chunk] = []
        var seen: [String: String] = [:]
        try forEachChunk(path: path, chunking: chunking) { (file, position, chunk) throws(PublishError) in
            if let first = seen[chunk.id] {
                throw .badInput(file, position, "duplicate id \"\(chunk.id)\" (first seen in \(first))")
            }
            seen[chunk.id] = "\(file) \(position)"
            chunks.append(chunk)
        }
        return chunks
    }

    /// `chunk` with its title and content in NFC: the index compares bytes, and devices search
    /// with queries in NFC (`LexicalQuery.tokens`), so text written decomposed (Hangul as its
    /// jamo, kana with a combining mark) would match no query. ASCII text is left as it is.
    static func composed(_ chunk: Chunk) -> Chunk {
        var composed = chunk
        (composed.title, composed.content) = (chunk.title.composed, chunk.content.composed)
        return composed
    }

    /// The largest Markdown or text file read, in bytes: chunking holds several times its size
    /// (the text, its lines, its words), and a file this large is a data dump, not prose.
    static let maxTextFileBytes = Int64(RecordParser.maxLineBytes)

    /// Calls `body` with every chunk of the source in reading order (file order, then record
    /// order), each with its file and position, holding at most one file's chunks at a time and,
    /// for `.jsonl`, one line, for a `.json` array one record: a publish of a million records
    /// streams them, in either form. Ids are not checked
    /// for repeats here (`read` does; a publish's snapshot writer refuses a repeated id).
    /// `notice` hears, in one line each, what a publisher may not have meant: a link to a folder
    /// passed over, a file that holds no chunks.
    /// `excluding`: folders under a source folder that are no source (the repository published
    /// to: its manifests and roots are JSON, and a second publish would read them as records).
    public static func forEachChunk(path: String, chunking: ChunkingOptions = ChunkingOptions(),
                                    excluding: [String] = [], notice: (String) -> Void = { _ in },
                                    _ body: (_ file: String, _ position: String, Chunk) throws(PublishError) -> Void) throws(PublishError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { throw PublishError(.io, "the source \(path) does not exist") }
            throw PublishError(.io, "cannot read the source \(path) (\(String(cString: strerror(errno))))")
        }
        let files: [(full: String, relative: String, size: Int64)]
        if info.st_mode & S_IFMT == S_IFDIR {
            files = try listFiles(in: path, excluding: excluding, notice: notice)
        } else {
            // A pipe (`--source <(…)`) would be read empty by the second of a publish's passes,
            // and a FIFO without a writer would hold the publish for good.
            guard info.st_mode & S_IFMT == S_IFREG else {
                throw .badInput(path, nil, "the source is not a regular file or a folder (a pipe, a socket or a device): a publish reads it two or three times; write it to a file")
            }
            // Named on its own, a file of another kind (.ndjson, .csv) is refused, not chunked
            // as text under ids that the right file's publish would then all replace.
            let kind = (path as NSString).pathExtension.lowercased()
            guard extensions.contains(kind) else {
                throw .badInput(path, nil, "the source's kind comes from its extension, and .\(kind) is none of .\(extensions.sorted().joined(separator: ", .")); rename it (JSON Lines: .jsonl)")
            }
            files = [(path, (path as NSString).lastPathComponent, Int64(info.st_size))]
        }
        for file in files {
            var found = 0
            func take(_ position: String, _ chunk: Chunk) throws(PublishError) {
                found += 1
                try body(file.full, position, Self.composed(chunk))
            }
            let kind = (file.relative as NSString).pathExtension.lowercased()
            switch kind {
            case "jsonl":
                try RecordParser.forEachLine(of: file.full, take)
            case "json":
                try RecordParser.forEachArrayRecord(of: file.full, take)
            default:
                if file.size > maxTextFileBytes {
                    throw .badInput(file.full, nil, "larger than \(maxTextFileBytes >> 20) MiB, more than a Markdown or text file of prose holds; split it into files")
                }
                let bytes: [UInt8]
                do { bytes = try FileSystem.read(file.full) } catch { throw PublishError(.io, error.message, cause: error) }
                // Ids and sources name the file in NFC, so that a folder written on macOS (NFD
                // names) publishes the same ids as its copy written on Linux.
                let relative = file.relative.composed
                for (position, chunk) in try parse(bytes, relativePath: relative, displayName: file.full, chunking: chunking) {
                    try take(position, chunk)
                }
            }
            // Emptied by a failed save or a sync tool, a file would take its chunks off every
            // device without a word.
            if found == 0 {
                let what = ["json", "jsonl"].contains(kind) ? "no records" : "no text (empty, or only white space, front matter or comments)"
                notice("\(file.full) holds \(what); its chunks, if an earlier version had any, leave this one")
            }
        }
    }

    /// The chunks of one Markdown or text file with the position each came from (`part 2`);
    /// `.jsonl` and `.json` stream through `RecordParser.forEachLine` and `forEachArrayRecord`.
    static func parse(_ bytes: [UInt8], relativePath: String, displayName: String,
                      chunking: ChunkingOptions) throws(PublishError) -> [(String, Chunk)] {
        let text = try TextDecoding.utf8(bytes, file: displayName)
        return TextChunker(options: chunking).chunks(of: text, path: relativePath).enumerated().map {
            ("part \($0.offset + 1)", $0.element)
        }
    }

    /// Whether the entry `name` of `folder` (its bytes: not UTF-8) would be read or walked: a
    /// readable extension, or a folder (a link to one is not followed); one that cannot be
    /// looked at counts as one.
    private static func mayHoldChunks(folder: String, name: [UInt8]) -> Bool {
        if let dot = name.lastIndex(of: UInt8(ascii: ".")),
           let pathExtension = String(validating: name[(dot + 1)...], as: UTF8.self),
           extensions.contains(pathExtension.lowercased()) { return true }
        let path = Array(folder.utf8) + [UInt8(ascii: "/")] + name + [0]
        var info = stat()
        let looked = path.withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { lstat($0.baseAddress!, &info) } }
        return looked != 0 || info.st_mode & S_IFMT == S_IFDIR
    }

    /// Files under `root` with a known extension, sorted by relative path (bytewise); dotfiles
    /// and dot folders skipped. A symbolic link to a file is read; one to a folder is not
    /// followed (no loops, nothing from outside the source by accident), and `notice` hears of
    /// it. Walked with
    /// `opendir`/`lstat` rather than `FileManager.enumerator`, whose relative paths drop every
    /// later occurrence of the root's path (`kb/b/kb/c.md` under `kb` came out as `bc.md`, and
    /// the file was skipped).
    /// A file reached twice (a link to a file in the source, a hard link) is read once, under
    /// its own path rather than a link's (else its first in that order), and `notice` hears of
    /// the other: read twice, its chunks
    /// would answer twice under two ids (a `.json`'s would refuse the publish as repeated ids).
    /// The folders `excluding` names are not walked (`notice` hears of each), nor is a file that
    /// vanishes between its listing and its look (an editor's or a sync tool's temporary file).
    /// - Throws: `.io` naming a folder that cannot be listed (a file is never skipped silently).
    static func listFiles(in root: String, excluding: [String] = [],
                          notice: (String) -> Void = { _ in }) throws(PublishError) -> [(full: String, relative: String, size: Int64)] {
        let base = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        func identity(_ info: stat) -> [UInt64] { [UInt64(info.st_dev), UInt64(info.st_ino)] }
        let excluded = Set(excluding.compactMap { path -> [UInt64]? in
            var info = stat()
            return stat(path, &info) == 0 ? identity(info) : nil
        })
        var found: [(relative: String, size: Int64, identity: [UInt64], isLink: Bool)] = []
        var pending = [""]
        while let relativeFolder = pending.popLast() {
            let folder = relativeFolder.isEmpty ? root : base + "/" + relativeFolder
            guard let stream = opendir(folder) else {
                throw PublishError(.io, "cannot list the source folder \(folder) (\(String(cString: strerror(errno))))")
            }
            defer { closedir(stream) }
            while let entry = readdir(stream) {
                let bytes = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
                guard let name = String(validating: bytes, as: UTF8.self) else {
                    // Refused only where it would be read or walked: a dot file or a file of
                    // another kind (`Präsentation.pdf` in Latin-1, an office lock file) is
                    // skipped whatever its name.
                    if bytes.first == UInt8(ascii: ".") || !Self.mayHoldChunks(folder: folder, name: bytes) { continue }
                    let shown = String(decoding: bytes, as: UTF8.self)
                    throw PublishError(.badInput, "a name in the source folder \(folder) is not UTF-8 (\(shown)); rename it (convmv, or unpack the archive with its encoding)")
                }
                if name.hasPrefix(".") { continue }
                if let control = TextDecoding.firstControlCharacter(name), Self.mayHoldChunks(folder: folder, name: bytes) {
                    // It would be the chunks' ids and source, in errors and logs of one line.
                    throw PublishError(.badInput, "a name in the source folder \(TextDecoding.shown(folder)) holds the control character \(control) (\(TextDecoding.shown(name))); rename it")
                }
                let relative = relativeFolder.isEmpty ? name : relativeFolder + "/" + name
                let path = folder + "/" + name
                var info = stat()
                guard lstat(path, &info) == 0 else {
                    if errno == ENOENT { continue }  // gone since readdir listed it
                    throw PublishError(.io, "cannot read \(path) (\(String(cString: strerror(errno))))")
                }
                if info.st_mode & S_IFMT == S_IFDIR {
                    if excluded.contains(identity(info)) {
                        notice("\(TextDecoding.shown(path)) is the repository published to: not read as a source")
                    } else {
                        pending.append(relative)
                    }
                    continue
                }
                // A file, or a symbolic link to one; sockets, FIFOs and devices are not read.
                let readable = extensions.contains((name as NSString).pathExtension.lowercased())
                let isLink = info.st_mode & S_IFMT == S_IFLNK
                if isLink, stat(path, &info) != 0 {
                    // A link whose file cannot be reached now (a share not mounted, a folder
                    // without search permission): skipped, its chunks would leave the next
                    // version, and every device.
                    guard !readable else {
                        throw PublishError(.io, "cannot read \(path): the file its link names cannot be reached (\(String(cString: strerror(errno))))")
                    }
                    continue
                }
                if info.st_mode & S_IFMT == S_IFREG, readable {
                    found.append((relative, Int64(info.st_size), identity(info), isLink))
                } else if info.st_mode & S_IFMT == S_IFDIR {
                    notice("\(TextDecoding.shown(path)) links to a folder, which is not followed: its files are not in this version (move or bind-mount the folder in instead)")
                } else if readable {
                    notice("\(TextDecoding.shown(path)) is not a regular file (a FIFO, a socket or a device): not read")
                }
            }
        }
        // A file reached twice is read under its own path, not a link's (`latest.md` → `v3.md`
        // keeps v3's ids when the link moves on), and between hard links under the first in
        // this order: the same one at every publish.
        let sorted = found.sorted { $0.relative.utf8.lexicographicallyPrecedes($1.relative.utf8) }
        var kept: [[UInt64]: (relative: String, isLink: Bool)] = [:]
        for file in sorted where kept[file.identity].map({ $0.isLink && !file.isLink }) ?? true {
            kept[file.identity] = (file.relative, file.isLink)
        }
        return sorted.compactMap { file in
            guard let chosen = kept[file.identity]?.relative, chosen != file.relative else {
                return (base + "/" + file.relative, file.relative, file.size)
            }
            notice("\(TextDecoding.shown(base + "/" + file.relative)) is the same file as \(TextDecoding.shown(base + "/" + chosen)) (a link): read once, as \(TextDecoding.shown(chosen))")
            return nil
        }
    }
}

/// UTF-8 checks that say where the first bad byte is.
enum TextDecoding {
    /// The text of `bytes` without a leading byte order mark (editors on Windows write one; kept,
    /// it would sit in the first chunk's text and title), or `.badInput` naming the line of the
    /// first invalid UTF-8 sequence, counted from `firstLine` (the file's line `bytes` start on:
    /// a record of a streamed array).
    /// A NUL byte is refused too, naming its line: valid UTF-8, but in text it is a file in
    /// UTF-16 without a byte order mark (every other byte of ASCII text), or not text at all.
    /// `atFileStart`: `bytes` open the file (a streamed record does not), and a UTF-16 byte
    /// order mark there is named as one.
    static func utf8(_ bytes: some Collection<UInt8>, file: String, firstLine: Int = 1, atFileStart: Bool = true) throws(PublishError) -> String {
        if atFileStart, let problem = utf16Mark(bytes) { throw .badInput(file, nil, problem) }
        if let text = String(validating: bytes, as: UTF8.self) {
            if let nul = bytes.firstIndex(of: 0) {
                throw .badInput(file, "line \(firstLine + bytes[..<nul].count { $0 == UInt8(ascii: "\n") })",
                                "a NUL byte: not text, or UTF-16 without a byte order mark (save it as UTF-8)")
            }
            return text.hasPrefix("\u{FEFF}") ? String(text.dropFirst()) : text
        }
        var line = firstLine
        for piece in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            if String(validating: piece, as: UTF8.self) == nil { break }
            line += 1
        }
        throw .badInput(file, "line \(line)", "invalid UTF-8")
    }

    /// What a file that opens with a UTF-16 byte order mark is, or nil.
    static func utf16Mark(_ bytes: some Collection<UInt8>) -> String? {
        guard bytes.starts(with: [0xFF, 0xFE]) || bytes.starts(with: [0xFE, 0xFF]) else { return nil }
        return "UTF-16 (it starts with a UTF-16 byte order mark), not UTF-8: save it as UTF-8"
    }

    /// A C0 control character or DEL: what an id or a file name must not hold, named as they
    /// are in one-line errors and logs.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool { scalar.value < 0x20 || scalar.value == 0x7F }

    /// `name` with each control character shown as `?`, for a line of its own.
    static func shown(_ name: String) -> String {
        String(name.unicodeScalars.map { isControl($0) ? "?" : Character($0) })
    }

    /// The first control character of `text`, as `U+000A`, or nil.
    static func firstControlCharacter(_ text: String) -> String? {
        guard let scalar = text.unicodeScalars.first(where: isControl) else { return nil }
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: 4 - hex.count) + hex
    }
}
