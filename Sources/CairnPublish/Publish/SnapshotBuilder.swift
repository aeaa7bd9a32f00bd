import CairnCore
import CairnIndex
import CairnStore
import Foundation

/// Finishes the new version's snapshot file, checks it, and compresses it into its blob, each
/// step a pass over files: no row is held in memory.
enum SnapshotBuilder {
    struct Built {
        /// The uncompressed snapshot in the scratch folder (for the canary check and the deltas).
        var path: String
        var meta: SnapshotMeta
        /// Its set hash, which each delta to it carries (format 2).
        var setHash: ContentID
        /// The compressed blob in the scratch folder, its SHA-256 and sizes.
        var blobPath: String
        var blob: Zlib.Compressed
    }

    static func finish(_ stream: SnapshotWriter.Stream, channel: String, version: Int, model: PublishedModel,
                       scratch: String) throws(PublishError) -> Built {
        do {
            let meta = try stream.finish(channel: channel, version: version, modelID: model.id)
            // What is signed is checked whole here, once: SQLite's quick check and the FTS index
            // (which a device does not repeat on these signed bytes), every hash, the state root.
            try Snapshot.verify(at: stream.path, expectedStateRoot: meta.stateRoot)
            let blobPath = scratch + "/snapshot-\(version).blob"
            let blob = try Zlib.compressFile(stream.path, to: blobPath, level: 9)
            guard let setHash = stream.setHash else { throw PublishError(.io, "the snapshot stream has no set hash") }
            return Built(path: stream.path, meta: meta, setHash: setHash, blobPath: blobPath, blob: blob)
        } catch let error as IndexError {
            throw PublishError(.io, "cannot build the snapshot: \(error.message)", cause: error)
        } catch let error as StoreError {
            throw PublishError(.io, "cannot build the snapshot: \(error.message)", cause: error)
        } catch {
            throw PublishError(.io, "cannot build the snapshot")
        }
    }
}

/// Deltas to the new version from each earlier one, kept only when smaller than the snapshot:
/// each built by one merge of the two snapshot files' rows in id order (both written by
/// `SnapshotWriter`, and verified), its upserts streamed to a scratch file and compressed from
/// there; only the deleted ids are held in memory.
enum DeltaBuilder {
    struct Built {
        var ref: Manifest.DeltaRef
        var blobPath: String
    }

    static func build(bases: [PublishedVersion], new: SnapshotBuilder.Built, withSetHash: Bool, scratch: String) throws(PublishError)
        -> (built: [Built], skipped: [String]) {
        var built: [Built] = [], skipped: [String] = []
        for base in bases {
            let from = base.manifest.version
            guard base.manifest.dimension == new.meta.dimension else {
                skipped.append("v\(from): another embedding dimension")
                continue
            }
            let raw = scratch + "/delta-\(from).raw", blobPath = scratch + "/delta-\(from).blob"
            defer { unlink(raw) }
            do {
                try writeDelta(from: base, to: new, toSetHash: withSetHash ? new.setHash : nil, at: raw, scratch: scratch)
            } catch {
                throw PublishError(.io, "cannot build the delta from version \(from): \(error)")
            }
            guard let blob = try compress(raw, to: blobPath, below: new.blob.size) else {
                skipped.append("v\(from): delta not smaller than the snapshot (\(new.blob.size) B)")
                continue
            }
            built.append(Built(ref: .init(fromVersion: from, fromStateRoot: base.manifest.stateRoot, sha256: blob.sha256,
                                          size: blob.size, uncompressedSize: blob.inputSize),
                               blobPath: blobPath))
        }
        return (built.sorted { $0.ref.fromVersion < $1.ref.fromVersion }, skipped)
    }

    /// The delta at `raw` compressed into `blobPath`, or nil when it would not be smaller than
    /// `size` bytes.
    private static func compress(_ raw: String, to blobPath: String, below size: Int) throws(PublishError) -> Zlib.Compressed? {
        do {
            return try Zlib.compressFile(raw, to: blobPath, level: 9, limit: size - 1)
        } catch {
            guard error.code == .sizeLimitExceeded else {
                throw PublishError(.io, "cannot compress a delta: \(error.message)", cause: error)
            }
            return nil
        }
    }

    /// The uncompressed delta from `base` to `new` (protocol/delta.md) at `path`: the rows of
    /// both in id order, merged; a row of `new` whose id is new or whose content, metadata or
    /// vector hash differs is an upsert, an id only `base` holds a delete.
    private static func writeDelta(from base: PublishedVersion, to new: SnapshotBuilder.Built, toSetHash: ContentID?, at path: String,
                                   scratch: String) throws -> Void {
        let (old, current) = (try Snapshot.RowReader(path: base.path), try Snapshot.RowReader(path: new.path))
        let upsertsPath = path + ".upserts"
        guard FileManager.default.createFile(atPath: upsertsPath, contents: nil),
              let upserts = FileHandle(forWritingAtPath: upsertsPath) else { throw PublishError(.io, "cannot create \(upsertsPath)") }
        defer { try? upserts.close(); unlink(upsertsPath) }
        var deletes: [String] = []
        var upsertCount = 0
        var pending: [UInt8] = []
        func upsert(_ id: String) throws {
            guard let record = try current.record(id: id) else {
                throw PublishError(.io, "the new snapshot lost the row of \"\(id)\" while the delta was built")
            }
            pending += Delta.encodedUpsert(record)
            upsertCount += 1
            if pending.count >= 1 << 20 {
                try upserts.write(contentsOf: pending)
                pending.removeAll(keepingCapacity: true)
            }
        }
        var (a, b) = (try old.next(), try current.next())
        while a != nil || b != nil {
            if let x = a, b.map({ String.utf8Precedes(x.id, $0.id) }) ?? true {
                deletes.append(x.id)
                a = try old.next()
            } else if let y = b, a.map({ String.utf8Precedes(y.id, $0.id) }) ?? true {
                try upsert(y.id)
                b = try current.next()
            } else {
                if a!.hashes != b!.hashes { try upsert(b!.id) }
                (a, b) = (try old.next(), try current.next())
            }
        }
        try upserts.write(contentsOf: pending)
        try upserts.synchronize()
        // Header, upserts, deletes.
        guard FileManager.default.createFile(atPath: path, contents: Data(Delta.encodedHeader(
            fromVersion: base.manifest.version, toVersion: new.meta.version, fromStateRoot: base.manifest.stateRoot,
            toStateRoot: new.meta.stateRoot, toSetHash: toSetHash, dimension: new.meta.dimension,
            upserts: upsertCount, deletes: deletes.count))),
            let output = FileHandle(forWritingAtPath: path) else { throw PublishError(.io, "cannot create \(path)") }
        defer { try? output.close() }
        try output.seekToEnd()
        let fd = open(upsertsPath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw PublishError.reading(upsertsPath) }
        let input = FileHandle(fileDescriptor: fd, closeOnDealloc: false)
        defer { try? input.close() }
        while let block = try input.read(upToCount: 1 << 20), !block.isEmpty { try output.write(contentsOf: block) }
        try output.write(contentsOf: deletes.flatMap(Delta.encodedDelete))
    }
}
