// cairn-bench install-phases --index FILE [--repeat 3]
//                             [--delta-base FILE --delta BLOB --delta-size N --chunk-count N]
//
// What the file-bound phases of an install cost on one snapshot file, each the best of
// `--repeat` runs (the file stays in the page cache, as it is right after an install writes it):
// the row scan with each check (`Snapshot.scan`: none = opening to serve or after a delta,
// recomputed = after a full snapshot), the structure checks a device no longer runs on a signed
// snapshot (`Snapshot.verifyStructure`), and copying the file in the kernel, then fsyncing it.
//
// With a delta (its compressed blob, its uncompressed size, the version it makes and that
// version's chunk count) and the snapshot file it applies to: what SQLite alone takes to apply it
// to a page-cached copy of that file (`SnapshotWriter.apply`, the state root checked by the
// caller as a device does), and the FTS5 work alone (each touched row's old terms removed and
// each upserted row's added, on a fresh copy, one transaction). No fetch, no check, no fsync:
// the floor of any delta install that updates the full-text index before its swap.
import CairnCore
import CairnIndex
import CairnStore
import Foundation

func installPhases(_ arguments: [String]) throws {
    let path = try requiredOption("--index", in: arguments)
    let repeats = try intOption("--repeat", in: arguments, default: 3)
    let clock = ContinuousClock()
    /// The best of `repeats` timings of `body`, each after an untimed `setup`.
    func best(setup: () throws -> Void = {}, _ body: () throws -> Void) rethrows -> Double {
        var best = Double.infinity
        for _ in 0..<repeats {
            try setup()
            let start = clock.now
            try body()
            best = min(best, milliseconds(clock.now - start))
        }
        return best
    }
    let root = try Snapshot.meta(at: path).stateRoot
    var result: [String: Any] = [:]
    result["scan_stored_ms"] = try best { _ = try Snapshot.scan(at: path, check: .storedHashes) }
    result["scan_recomputed_ms"] = try best { _ = try Snapshot.scan(at: path, check: .recomputedHashes, expectedStateRoot: root) }
    let copy = path + ".phases-copy"
    defer { unlink(copy) }
    result["structure_ms"] = try best {
        unlink(copy)
        try FileSystem.copyFile(from: path, to: copy)
        try Snapshot.verifyStructure(at: copy)
    }
    var fsyncMS = Double.infinity
    result["copy_ms"] = try best {
        unlink(copy)
        try FileSystem.copyFile(from: path, to: copy)
        let start = clock.now
        let fd = open(copy, O_RDONLY)
        fsync(fd)
        close(fd)
        fsyncMS = min(fsyncMS, milliseconds(clock.now - start))
    }
    result["fsync_after_copy_ms"] = fsyncMS
    if let base = option("--delta-base", in: arguments) {
        let delta = try Delta.decode(try Zlib.decompress(try FileSystem.read(try requiredOption("--delta", in: arguments)),
                                                         expectedSize: try intOption("--delta-size", in: arguments, default: 1)))
        let edit = SnapshotWriter.Edit(upserts: delta.upserts, deletes: delta.deletes)
        var meta = try Snapshot.meta(at: base)
        meta.chunkCount = try intOption("--chunk-count", in: arguments, default: 1)
        meta.version += 1
        result["delta_rows"] = edit.upserts.count + edit.deletes.count
        func freshCopy() throws {
            unlink(copy)
            try FileSystem.copyFile(from: base, to: copy)
        }
        result["delta_apply_ms"] = try best(setup: freshCopy) {
            try SnapshotWriter.apply([edit], newMeta: meta, to: copy, check: .checkedByCaller, ifRefused: .discarded)
        }
        result["delta_fts_ms"] = try best(setup: freshCopy) { try ftsStatements(of: edit, in: copy) }
    }
    try printJSON(result)
}

/// The FTS5 work of replacing the terms of every row `edit` touches, alone, in one transaction
/// on `path`: each deleted or upserted row's old terms removed and each upserted row's added, in
/// rowid order as `SnapshotWriter.apply` does for rows whose text changed (it skips an upsert
/// whose title and content are unchanged; this does not, so a metadata-only delta shows what that
/// skip saves).
private func ftsStatements(of edit: SnapshotWriter.Edit, in path: String) throws {
    let db = try Database(path: path, mode: .readWrite)
    try db.exec("PRAGMA journal_mode=MEMORY; PRAGMA synchronous=OFF")
    let locate = try db.prepare(SnapshotWriter.FullTextSQL.locate)
    let indexed = try db.prepare(SnapshotWriter.FullTextSQL.indexed)
    let remove = try db.prepare(SnapshotWriter.FullTextSQL.remove)
    let add = try db.prepare(SnapshotWriter.FullTextSQL.add)
    let last = try db.prepare("SELECT max(rowid) FROM chunks")
    var unused = try last.step() ? last.int64(at: 0) + 1 : 1
    try db.transaction { () throws(IndexError) in
        // (rowid, whether it is a row's, the chunk to add): existing rows first, by rowid.
        var rows: [(rowid: Int64, existing: Bool, chunk: Chunk?)] = []
        for (id, chunk) in edit.deletes.map({ ($0, Chunk?.none) }) + edit.upserts.map({ ($0.chunk.id, Optional($0.chunk)) }) {
            locate.reset()
            try locate.bind(id, at: 1)
            if try locate.step() {
                rows.append((locate.int64(at: 0), true, chunk))
            } else {
                rows.append((unused, false, chunk))  // a new id: only its terms are added, under a rowid no row has
                unused += 1
            }
        }
        rows.sort { $0.rowid < $1.rowid }
        for row in rows {
            if row.existing {
                indexed.reset()
                try indexed.bind(row.rowid, at: 1)
                guard try indexed.step() else { continue }
                remove.reset()
                try remove.bind(row.rowid, at: 1)
                try remove.bind(indexed.string(at: 0) ?? "", at: 2)
                try remove.bind(indexed.string(at: 1) ?? "", at: 3)
                try remove.run()
            }
            guard let chunk = row.chunk else { continue }
            add.reset()
            try add.bind(row.rowid, at: 1)
            try add.bind(chunk.title, at: 2)
            try add.bind(chunk.content, at: 3)
            try add.run()
        }
    }
}
