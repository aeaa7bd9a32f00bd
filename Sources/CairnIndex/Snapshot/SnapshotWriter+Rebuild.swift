import CairnCore

extension SnapshotWriter {
    /// Writes at `output` (which must not exist) the snapshot file `create` writes for the rows
    /// and meta of the snapshot at `source`: with the same SQLite library, the very bytes the
    /// publisher wrote for that version, whatever rowids deltas gave the source's rows
    /// (protocol/snapshot.md, "Reproducible bytes"). The caller verifies `source` first; the
    /// state root is checked again by `create`.
    public static func rebuild(from source: String, to output: String) throws(IndexError) {
        let db = try Database(path: source, mode: .readOnly(immutable: true))
        let meta = try Snapshot.meta(in: db)
        let statement = try db.prepare("SELECT \(SnapshotSchema.chunkColumns), embedding FROM chunks")
        var entries: [ChunkRecord] = []
        entries.reserveCapacity(meta.chunkCount)
        while try statement.step() {
            let chunk = try ChunkRow.chunk(from: statement)
            guard let bytes = statement.blob(at: 6), bytes.count == meta.dimension * 4 else {
                throw IndexError(.dimensionMismatch, "a stored vector does not have the snapshot's dimension")
            }
            entries.append(ChunkRecord(chunk: chunk, vector: ChunkRow.decode(bytes)))
        }
        try create(at: output, meta: meta, entries: entries)
    }
}
