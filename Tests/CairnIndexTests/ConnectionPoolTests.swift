@testable import CairnIndex
import CairnTestSupport
import Foundation
import Testing

/// The served index's connections when its path comes to name another file: an install of the
/// same version number (a trust recovery putting the publisher's version N over a thief's)
/// renames its folder over the served one before the query path lets go of it.
@Suite("A served index's connections when its path names another file", .offCooperativePool)
struct ConnectionPoolTests {
    @Test("Given a served index whose path now names another snapshot of the same version number, when a query needs a connection while the pool's only one is in use, then it waits for that one and reads the served snapshot, not the new file")
    func freshConnectionReadsTheServedFile() async throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = try Corpus.snapshot(in: directory)
        let index = try SearchIndex(path: path, configuration: RankingConfiguration(connectionPoolSize: 1))
        // Version 1 again, of other chunks (another state root), renamed over the served file.
        let replacement = try Corpus.snapshot(in: directory, name: "replacement.sqlite", entries: Array(Corpus.entries.prefix(3)))
        try #require(rename(replacement, path) == 0)
        let served = index.meta
        #expect(try Snapshot.meta(at: path) != served)

        // A holds the only connection until B is seen waiting, then gives it back.
        let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let pool = index.pool
        async let first = onThread { () throws -> SnapshotMeta in
            try pool.withConnection { (db) throws(IndexError) -> SnapshotMeta in
                holding.signal()
                release.wait()
                return try Snapshot.meta(in: db)
            }
        }
        holding.wait()
        async let second = onThread { () throws -> SnapshotMeta in
            try pool.withConnection { (db) throws(IndexError) in try Snapshot.meta(in: db) }
        }
        let waited: Bool
        do {
            try await waitUntil("the second query waits for the served file's connection") { pool.waiting == 1 }
            waited = true
        } catch {
            waited = false
        }
        release.signal()
        let (a, b) = try await (first, second)
        #expect(waited, "the second query opened its own connection instead of waiting")
        #expect(a == served && b == served, "the second query read \(b.stateRoot.hex.prefix(12)), not the served \(served.stateRoot.hex.prefix(12))")
        #expect(pool.waiting == 0)
    }
}
