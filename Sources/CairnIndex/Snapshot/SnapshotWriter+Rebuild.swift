import CairnCore
import Foundation

extension SnapshotWriter {
    /// Writes at `output` (which must not exist) the snapshot file `create` writes for the rows
    /// and meta of the snapshot at `source`: with the same SQLite library, the very bytes the
    /// publisher wrote for that version, whatever rowids deltas gave the source's rows
    /// (protocol/snapshot.md, "Reproducible bytes"). The caller verifies `source` first; the
    /// state root is checked again by `create`.
    /// `stopping` is asked every 4,096 rows (true ends it, `output` removed, with
    /// an `io` error saying it stopped): a million rows take minutes.
    public static func rebuild(from source: String, to output: String, stopping: () -> Bool = { false }) throws(IndexError) {
        let db = try Database(path: source, mode: .readOnly(immutable: true))
        let meta = try Snapshot.meta(in: db)
        // A row at a time into the writer's stream (whose bytes are `create`'s): flat memory.
        let stream = try Stream(at: output, dimension: meta.dimension)
        let statement = try db.prepare("SELECT \(SnapshotSchema.chunkColumns), embedding FROM chunks")
        var row = 0
        while try statement.step() {
            if row % 4096 == 0, stopping() {
                unlink(output)
                throw IndexError(.io, "the snapshot's rebuild was stopped")
            }
            let chunk = try ChunkRow.chunk(from: statement)
            guard let bytes = statement.blob(at: 6), bytes.count == meta.dimension * 4 else {
                throw IndexError(.dimensionMismatch, "a stored vector does not have the snapshot's dimension")
            }
            try stream.add(chunk, vector: VectorBytes.decode(bytes), origin: "row \(row)")
            row += 1
        }
        guard try stream.finish(channel: meta.channel, version: meta.version, modelID: meta.modelID) == meta else {
            unlink(output)
            throw IndexError(.stateRootMismatch, "the rebuilt snapshot's rows do not hash to the source's state root")
        }
    }
}
