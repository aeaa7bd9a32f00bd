public import CairnCore
import CairnIndex
public import Foundation

/// Vectors already computed, in a small SQLite file shared by every repository a publisher
/// writes: keyed by the model (its id and the SHA-256 of its weights) and the SHA-256 of the
/// text embedded (`Chunk.embeddingText`), so an unchanged chunk is never embedded twice.
public final class EmbeddingCache: Sendable {
    /// `${XDG_CACHE_HOME:-~/.cache}/cairn/embedding-cache.sqlite`.
    public static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let cache = environment["XDG_CACHE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ((environment["HOME"] ?? NSHomeDirectory()) as NSString).appendingPathComponent(".cache")
        return (cache as NSString).appendingPathComponent("cairn/embedding-cache.sqlite")
    }

    public let path: String
    private let db: Database

    /// Opens (creating if needed) the cache at `path`.
    public init(path: String) throws(PublishError) {
        self.path = path
        do {
            // The publisher's own, whatever the umask (a command writing a public repository
            // unmasks read bits, `followRepositoryReadability`): it holds vectors of every
            // repository's text, private ones too. SQLite gives its -wal and -shm the file's mode.
            let folder = (path as NSString).deletingLastPathComponent
            if !folder.isEmpty {
                try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                         attributes: [.posixPermissions: 0o700])
            }
            let created = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if created >= 0 { close(created) }
            db = try Database(path: path, mode: .readWriteCreate, busyTimeout: 30_000)
            // Switching to WAL needs an exclusive lock and SQLite does not call the busy handler
            // for it, so two publishes opening a new cache together would see "database is
            // locked" at once: try again for as long as the busy timeout would have waited.
            let deadline = Date().addingTimeInterval(30)
            while true {
                do {
                    try db.exec("""
                        PRAGMA journal_mode = WAL;
                        CREATE TABLE IF NOT EXISTS embeddings(
                            model_key TEXT NOT NULL,
                            text_hash BLOB NOT NULL,
                            vector BLOB NOT NULL,
                            PRIMARY KEY(model_key, text_hash)) WITHOUT ROWID;
                        """)
                    break
                } catch where error.isBusy && Date() < deadline {
                    usleep(20_000)
                }
            }
        } catch {
            throw PublishError(.io, "cannot open the embedding cache \(path): \(error.message)", cause: error)
        }
    }

    /// The cached vector of `textHash` under `modelKey`, if any has `dimension` values.
    public func vector(modelKey: String, textHash: ContentID, dimension: Int) throws(PublishError) -> [Float]? {
        do {
            let statement = try db.prepare("SELECT vector FROM embeddings WHERE model_key = ?1 AND text_hash = ?2")
            try statement.bind(modelKey, at: 1)
            try statement.bind(textHash.bytes, at: 2)
            guard try statement.step(), let bytes = statement.blob(at: 0), bytes.count == dimension * 4 else { return nil }
            let vector = VectorBytes.decode(bytes)
            return vector.allSatisfy(\.isFinite) ? vector : nil
        } catch {
            throw PublishError(.io, "cannot read the embedding cache \(path): \(error.message)", cause: error)
        }
    }

    /// Adds the entries of the cache file at `path` that this cache lacks, in one transaction;
    /// those it holds stay (a vectors file's rows, gathered apart while a publish ran, never
    /// replace what the model computed).
    public func merge(from path: String) throws(PublishError) {
        do {
            let attach = try db.prepare("ATTACH DATABASE ?1 AS gathered")
            try attach.bind(path, at: 1)
            try attach.run()
            defer { try? db.exec("DETACH DATABASE gathered") }
            try db.transaction { () throws(IndexError) in
                try db.exec("INSERT OR IGNORE INTO main.embeddings(model_key, text_hash, vector) SELECT model_key, text_hash, vector FROM gathered.embeddings")
            }
        } catch {
            throw PublishError(.io, "cannot add the vectors file's rows to the embedding cache \(self.path): \(error.message)", cause: error)
        }
    }

    /// Stores vectors in one transaction.
    public func store(modelKey: String, _ entries: [(textHash: ContentID, vector: [Float])]) throws(PublishError) {
        do {
            try db.transaction { () throws(IndexError) in
                let statement = try db.prepare(
                    "INSERT OR REPLACE INTO embeddings(model_key, text_hash, vector) VALUES(?1, ?2, ?3)")
                for entry in entries {
                    statement.reset()
                    try statement.bind(modelKey, at: 1)
                    try statement.bind(entry.textHash.bytes, at: 2)
                    try statement.bind(VectorBytes.encode(entry.vector), at: 3)
                    try statement.run()
                }
            }
        } catch {
            throw PublishError(.io, "cannot write the embedding cache \(path): \(error.message)", cause: error)
        }
    }
}
