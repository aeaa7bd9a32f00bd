import CairnCore
import CairnIndex
import CairnStore
import Foundation

/// Builds the new version's snapshot file and its compressed blob.
enum SnapshotBuilder {
    struct Built {
        /// The uncompressed snapshot in the scratch folder (for the canary check).
        var path: String
        var records: [ChunkRecord]
        var stateRoot: ContentID
        var compressed: [UInt8]
        var uncompressedSize: Int
    }

    static func build(entries: [ChunkRecord], channel: String, version: Int, model: PublishedModel,
                      scratch: String) throws(PublishError) -> Built {
        let meta = SnapshotMeta(channel: channel, version: version, dimension: model.dimension, modelID: model.id, entries: entries)
        let path = scratch + "/snapshot-\(version).sqlite"
        do {
            try SnapshotWriter.create(at: path, meta: meta, entries: entries)
            // What is signed is checked whole here, once: SQLite's quick check and the FTS index
            // (which a device does not repeat on these signed bytes), every hash, the state root.
            try Snapshot.verify(at: path, expectedStateRoot: meta.stateRoot)
            let bytes = try FileSystem.read(path)
            let compressed = try Zlib.compress(bytes, level: 9)
            return Built(path: path, records: entries,
                         stateRoot: meta.stateRoot, compressed: compressed, uncompressedSize: bytes.count)
        } catch let error as IndexError {
            throw PublishError(.io, "cannot build the snapshot: \(error.message)", cause: error)
        } catch let error as StoreError {
            throw PublishError(.io, "cannot build the snapshot: \(error.message)", cause: error)
        } catch {
            throw PublishError(.io, "cannot build the snapshot")
        }
    }
}

/// Deltas to the new version from each earlier one, kept only when smaller than the snapshot.
enum DeltaBuilder {
    struct Built {
        var ref: Manifest.DeltaRef
        var compressed: [UInt8]
    }

    static func build(bases: [PublishedVersion], new: [ChunkRecord], version: Int, dimension: Int,
                      snapshotSize: Int) throws(PublishError) -> (built: [Built], skipped: [String]) {
        var built: [Built] = [], skipped: [String] = []
        for base in bases {
            guard base.manifest.dimension == dimension else {
                skipped.append("v\(base.manifest.version): another embedding dimension")
                continue
            }
            do {
                let delta = try Delta.between(old: base.records, new: new, fromVersion: base.manifest.version,
                                              toVersion: version, dimension: dimension)
                let encoded = delta.encoded
                let compressed = try Zlib.compress(encoded, level: 9)
                guard compressed.count < snapshotSize else {
                    skipped.append("v\(base.manifest.version): delta (\(compressed.count) B) not smaller than the snapshot")
                    continue
                }
                built.append(Built(ref: .init(fromVersion: base.manifest.version, fromStateRoot: delta.fromStateRoot,
                                              sha256: ContentID(hashing: compressed), size: compressed.count,
                                              uncompressedSize: encoded.count),
                                   compressed: compressed))
            } catch {
                throw PublishError(.io, "cannot build the delta from version \(base.manifest.version): \(error)")
            }
        }
        return (built.sorted { $0.ref.fromVersion < $1.ref.fromVersion }, skipped)
    }
}
