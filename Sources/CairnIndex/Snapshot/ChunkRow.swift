import CairnCore
import Foundation

/// Conversions between `Chunk` / vectors and the columns of the `chunks` table.
enum ChunkRow {
    /// The `tags` column: canonical JSON array text.
    static func encodeTags(_ tags: [String]) -> String {
        String(decoding: CanonicalJSON.array(tags.map(CanonicalJSON.string)).bytes, as: UTF8.self)
    }

    static func decodeTags(_ text: String) throws(IndexError) -> [String] {
        // Most chunks have no tags; skip a JSONDecoder per row for them (install verification
        // and search read every row).
        if text == "[]" { return [] }
        do {
            return try JSONDecoder().decode([String].self, from: Data(text.utf8))
        } catch {
            throw IndexError(.snapshotMalformed, "a chunk's tags column is not a JSON array of strings")
        }
    }

    /// Reads a chunk from the current row of a statement that selected `SnapshotSchema.chunkColumns`
    /// starting at column `first`.
    static func chunk(from statement: Statement, first: Int32 = 0) throws(IndexError) -> Chunk {
        Chunk(id: statement.string(at: first) ?? "",
              title: statement.string(at: first + 1) ?? "",
              content: statement.string(at: first + 2) ?? "",
              scenario: statement.string(at: first + 3),
              tags: try decodeTags(statement.string(at: first + 4) ?? "[]"),
              source: statement.string(at: first + 5))
    }
}
