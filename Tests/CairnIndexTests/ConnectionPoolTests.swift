@testable import CairnIndex
import CairnTestSupport
import Foundation
import Testing

/// The served index's connections when its path comes to name another file: an install of the
/// same version number (a trust recovery putting the publisher's version N over a thief's)
/// renames a new file to that path while the query path still serves the old one.
@Suite("A served index's connections when its path names another file")
struct ConnectionPoolTests {
    /// A served snapshot (version 1 of the corpus), then version 1 again of other chunks (another
    /// state root) renamed over its path. Returns the index and the served meta.
    static func replacedIndex(in directory: String) throws -> (SearchIndex, SnapshotMeta) {
        let path = try Corpus.snapshot(in: directory)
        let index = try SearchIndex(path: path, configuration: RankingConfiguration(connectionPoolSize: 1))
        let replacement = try Corpus.snapshot(in: directory, name: "replacement.sqlite", entries: Array(Corpus.entries.prefix(3)))
        try #require(rename(replacement, path) == 0)
        #expect(try Snapshot.meta(at: path) != index.meta)
        return (index, index.meta)
    }

    @Test("Given a served index whose path now names another snapshot of the same version number, when a query needs a second connection while the pool's only one is in use (a lexical query scoring its halves on two), then the new connection reads the served snapshot, not the new file, and it does not wait for the first")
    func freshConnectionReadsTheServedFile() throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let (index, served) = try Self.replacedIndex(in: directory)
        let (outer, inner) = try index.pool.withConnection { (outer) throws(IndexError) in
            (try Snapshot.meta(in: outer), try index.pool.withConnection { (inner) throws(IndexError) in try Snapshot.meta(in: inner) })
        }
        #expect(outer == served && inner == served, "the new connection read \(inner.stateRoot.hex.prefix(12)), not the served \(served.stateRoot.hex.prefix(12))")
        // And after the served file's path is gone altogether (the clean-up removed the folder).
        try FileManager.default.removeItem(atPath: directory + "/snapshot.sqlite")
        let again = try index.pool.withConnection { (_) throws(IndexError) in
            try index.pool.withConnection { (inner) throws(IndexError) in try Snapshot.meta(in: inner) }
        }
        #expect(again == served)
    }

    @Test("Given a pool that cannot hold a descriptor of its file (no /proc), when a query needs a new connection after another file took the path, then it fails with one line saying so rather than read that file")
    func withoutProcTheReplacedPathIsRefused() throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = try Corpus.snapshot(in: directory)
        let (file, first) = try ConnectionPool.open(path, pinning: false)
        let pool = ConnectionPool(file: file, first: first, capacity: 1)
        // Before the path changes, a second connection opens by it.
        let before = try pool.withConnection { (_) throws(IndexError) in
            try pool.withConnection { (inner) throws(IndexError) in try Snapshot.meta(in: inner) }
        }
        #expect(before == (try Snapshot.meta(in: first)))
        let replacement = try Corpus.snapshot(in: directory, name: "replacement.sqlite", entries: Array(Corpus.entries.prefix(3)))
        try #require(rename(replacement, path) == 0)
        do {
            _ = try pool.withConnection { (_) throws(IndexError) in
                try pool.withConnection { (inner) throws(IndexError) in try Snapshot.meta(in: inner) }
            }
            Issue.record("a connection was opened on the file that took the path")
        } catch {
            #expect(error.code == .io && error.message.contains("was replaced") && !error.message.contains("\n"), "\(error)")
        }
    }

    /// The descriptors this process has open on `file` (device and inode: other suites' files,
    /// opened and closed meanwhile, are not counted, and a path's spelling does not matter).
    static func descriptors(on file: Database.FileKey) -> Int {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.filter { Database.FileKey(path: "/proc/self/fd/" + $0) == file }.count
    }

    @Test("Given an index whose pool opens many connections beyond the ones it keeps, when they are given back and the index is released, then no descriptor of its file is left open; nor after an index that fails to open (rows of another file)")
    func noDescriptorLeft() throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = try Corpus.snapshot(in: directory)
        let other = try Corpus.snapshot(in: directory, name: "other.sqlite", entries: Array(Corpus.entries.prefix(3)))
        let otherRows = try SearchIndex(path: other).contents
        let file = try #require(Database.FileKey(path: path))
        do {
            let index = try SearchIndex(path: path, configuration: RankingConfiguration(connectionPoolSize: 1))
            func nest(_ depth: Int) throws(IndexError) {
                guard depth > 0 else { return }
                try index.pool.withConnection { (_) throws(IndexError) in try nest(depth - 1) }
            }
            try nest(20)
            // The pool's descriptor and the one connection it keeps.
            #expect(Self.descriptors(on: file) == 2)
        }
        #expect(Self.descriptors(on: file) == 0)
        do {
            _ = try SearchIndex(path: path, contents: otherRows)
            Issue.record("rows of another file were taken")
        } catch {
            #expect(error.code == .snapshotMalformed, "\(error)")
        }
        #expect(Self.descriptors(on: file) == 0)
    }
}
