import CairnCore
import CEncoderKernels
@testable import CairnIndex
import Foundation
import Testing

/// The rows file beside a snapshot: derived from the very vectors and hashes the verifying pass
/// checks, and used only when it is whole and names the version the index holds.
@Suite struct RowFileTests {
    @Test("Given a verified snapshot, when its rows file is written, then every row's codes, scale and signs are the quantization of the file's own float32 vector, and its leaf the state root's")
    func rowsAreDerivedFromTheVerifiedVectors() throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            let contents = try Snapshot.scan(at: path, check: .recomputedHashes, expectedStateRoot: Corpus.meta().stateRoot)
            let d = Corpus.dimension, words = RowFile.Layout.signWords(d)
            let db = try Database(path: path, mode: .readOnly(immutable: true))
            let rows = try db.prepare("SELECT rowid, embedding FROM chunks")
            var checked = 0
            while try rows.step() {
                let row = try #require(contents.row(rowid: rows.int64(at: 0)))
                let vector = try #require(rows.blob(at: 1))
                var codes = [Int8](repeating: 0, count: d), scale: Float = 0
                var signs = [UInt64](repeating: 0, count: words)
                vector.withUnsafeBytes { cairn_quantize_row_i8($0.baseAddress, Int32(d), &codes, &scale) }
                cairn_sign_bits_i8(codes, 0, 1, Int32(d), &signs)
                #expect(Array(contents.base.codes[row * d..<(row + 1) * d]) == codes && contents.base.scales[row] == scale)
                #expect(Array(contents.base.signs[row * words..<(row + 1) * words]) == signs)
                checked += 1
            }
            #expect(checked == Corpus.entries.count)
            #expect(contents.stateRoot() == Corpus.meta().stateRoot)
        }
    }

    @Test(arguments: ["flip a header byte", "cut the file short", "another version's", "flip an id offset", "name a scenario twice",
                      "set the top bit of the last id offset", "set the top bit of the first rowid"])
    func givenABrokenOrForeignRowsFile_whenTheVersionOpens_thenItIsRefusedAndWrittenAgainFromTheIndex(damage: String) throws {
        try withTemporaryDirectory { directory in
            let path = try Corpus.snapshot(in: directory)
            _ = try SearchIndex(path: path)  // writes the rows file
            let rows = IndexContents.basePath(beside: path)
            var bytes = try #require(FileManager.default.contents(atPath: rows))
            switch damage {
            case "flip a header byte": bytes[30] ^= 1
            case "cut the file short": bytes = bytes.prefix(bytes.count - 100)
            case "another version's":
                let other = (directory as NSString).appendingPathComponent("v2.sqlite")
                try SnapshotWriter.create(at: other, meta: Corpus.meta(version: 2, entries: Array(Corpus.entries.dropLast())),
                                          entries: Array(Corpus.entries.dropLast()))
                _ = try SearchIndex(path: other)
                bytes = try #require(FileManager.default.contents(atPath: IndexContents.basePath(beside: other)))
            case "name a scenario twice":
                // The dictionary section (JSON, outside the header's checksum): "earthquake"
                // becomes "flood" and spaces, so two codes name one scenario.
                let from = Array(#""earthquake""#.utf8), to = Array(#""flood"     "#.utf8)
                let at = try #require(bytes.indices.first { bytes[$0...].starts(with: from) })
                bytes.replaceSubrange(at..<at + from.count, with: to)
            case "set the top bit of the last id offset", "set the top bit of the first rowid":
                // Outside the header's checksum; read as a u64 or i64, each once stopped the
                // process (a conversion or a subtraction that overflowed) at every start.
                let file = try RowFile(path: rows, dimension: Corpus.dimension)
                let last = damage.contains("rowid") ? file.sectionOffset(.rowids) + 7 : file.sectionOffset(.idOffsets) + 8 * file.count + 7
                bytes[last] |= 0x80
            default:
                // An id offset beyond the ids: refused by the bounds check, never read past.
                let file = try RowFile(path: rows, dimension: Corpus.dimension)
                let offset = file.sectionOffset(.idOffsets) + 8
                bytes.replaceSubrange(offset..<offset + 8, with: withUnsafeBytes(of: UInt64(1 << 40).littleEndian, Array.init))
            }
            try bytes.write(to: URL(fileURLWithPath: rows))
            #expect(try IndexContents.open(beside: path, meta: Corpus.meta()) == nil)
            let reopened = try SearchIndex(path: path)
            #expect(reopened.rowsSource == .scanned)
            #expect(try reopened.search(SearchRequest(query: "boil water", k: 3, mode: .lexical), queryVector: nil).results.first?.chunk.id == "water-purify")
            #expect(try SearchIndex(path: path).rowsSource == .rowsFiles)
        }
    }
}
