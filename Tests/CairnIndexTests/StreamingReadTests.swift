import CairnCore
@testable import CairnIndex
import CairnTestSupport
import Foundation
import Testing

/// `Database.OpenMode.streaming` (the `cairn-stream` VFS, Sources/CSQLiteStream): a full
/// install's verifying pass reads the new index in direct runs of megabytes. Observed on the real
/// file: what it reads, and the page cache after it (mincore(2)).
@Suite struct StreamingReadTests {
    /// 4,000 rows of a page each: a file of several streams' runs.
    static func snapshot(in directory: String) throws -> String {
        try Corpus.snapshot(in: directory, entries: Corpus.pageRows(4_000))
    }

    /// Every row's rowid, id, content and vector, and each row's document length beside it (a
    /// second table read in step, as the verifying pass does), in rowid order.
    static func rows(of path: String, mode: Database.OpenMode) throws -> [String] {
        let db = try Database(path: path, mode: mode)
        let rows = try db.prepare("SELECT rowid, id, content, embedding FROM chunks ORDER BY rowid")
        let sizes = try db.prepare("SELECT id, sz FROM chunks_fts_docsize ORDER BY id")
        var result: [String] = []
        while try rows.step() {
            _ = try sizes.step()
            let vector = try rows.withBlob(at: 3) { Array($0) }
            let length = try sizes.withBlob(at: 1) { Array($0) }
            result.append("\(rows.int64(at: 0)) \(rows.string(at: 1) ?? "") \(rows.string(at: 2) ?? "") \(vector) \(sizes.int64(at: 0)) \(length)")
        }
        return result
    }

    @Test("Given a snapshot dropped from the page cache, when its rows are read in order through the streaming VFS, then they equal the default VFS's and the file stays out of the page cache",
          .enabled(if: PageCache.dropsPages, "the temporary folder keeps every page cached (tmpfs)"))
    func streamingReadsEqualAndBypassTheCache() throws {
        try withTemporaryDirectory { directory in
            let path = try Self.snapshot(in: directory)
            let expected = try Self.rows(of: path, mode: .readOnly(immutable: false))
            try #require(expected.count == 4_000)
            try #require(PageCache.drop(path))
            let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
            let pages = size / 4096

            let streamed = try Self.rows(of: path, mode: .streaming)

            #expect(streamed == expected)
            // Only the reads out of sequence (the schema, the B-trees' interior pages) went
            // through the page cache.
            let cached = try #require(PageCache.residentPages(path)).count
            #expect(cached < pages / 10, "\(cached) of \(pages) pages cached after a streaming read")
        }
    }

    @Test("Given a snapshot read through the streaming VFS, when a row is looked up out of order and the file is read again, then each read gives the stored values")
    func streamingReadsOutOfOrder() throws {
        try withTemporaryDirectory { directory in
            let path = try Self.snapshot(in: directory)
            let db = try Database(path: path, mode: .streaming)
            let one = try db.prepare("SELECT id FROM chunks WHERE rowid = ?1")
            // Rows far apart, backwards, then forwards again: stream starts, misses and moves.
            for rowid in [3_999, 17, 2_500, 2_501, 2_502, 1, 4_000] as [Int64] {
                try one.bind(rowid, at: 1)
                #expect(try one.step())
                #expect(one.string(at: 0) == String(format: "row-%05d", rowid - 1))
                one.reset()
            }
        }
    }
}
