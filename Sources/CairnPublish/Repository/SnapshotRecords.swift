import CairnCore
import CairnIndex
import Foundation

/// Every chunk of a snapshot file with its vector, trusted only after the records hash to the
/// state root a signed manifest names.
enum SnapshotRecords {
    static func read(at path: String, expectedStateRoot: ContentID, dimension: Int) throws(PublishError) -> [ChunkRecord] {
        var records: [ChunkRecord] = []
        do {
            let db = try Database(path: path, mode: .readOnly(immutable: true))
            let statement = try db.prepare("SELECT id, title, content, scenario, tags, source, embedding FROM chunks")
            while try statement.step() {
                let tags = try? JSONDecoder().decode([String].self, from: Data((statement.string(at: 4) ?? "").utf8))
                guard let tags, let vector = statement.blob(at: 6), vector.count == dimension * 4 else {
                    throw PublishError(.repositoryCorrupt, "a chunk row of \(path) has malformed tags or vector")
                }
                let chunk = Chunk(id: statement.string(at: 0) ?? "", title: statement.string(at: 1) ?? "",
                                  content: statement.string(at: 2) ?? "", scenario: statement.string(at: 3),
                                  tags: tags, source: statement.string(at: 5))
                records.append(ChunkRecord(chunk: chunk, vector: VectorBytes.decode(vector)))
            }
        } catch let error as PublishError {
            throw error
        } catch let error as IndexError {
            throw PublishError(.repositoryCorrupt, "cannot read the snapshot \(path): \(error.message)", cause: error)
        } catch {
            throw PublishError(.repositoryCorrupt, "cannot read the snapshot \(path)")
        }
        guard StateRoot.compute(chunks: records) == expectedStateRoot else {
            throw PublishError(.repositoryCorrupt, "the snapshot \(path) does not hash to its manifest's state root")
        }
        return records
    }
}
