/// The snapshot file: a SQLite database that *is* the ready-to-query index
/// (`protocol/snapshot.md` is the same text for readers of the format).
///
/// ```sql
/// -- page_size 4096, journal_mode DELETE; application_id 0x4361726E ('Carn'), user_version 1
/// CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
///   -- format 'cairn-snapshot-1', channel, version, state_root (hex), dimension, model_id,
///   -- chunk_count; integers as decimal text
/// CREATE TABLE chunks(
///     rowid INTEGER PRIMARY KEY,
///     id TEXT NOT NULL UNIQUE,
///     title TEXT NOT NULL,
///     content TEXT NOT NULL,
///     scenario TEXT,                 -- NULL when the chunk has none
///     tags TEXT NOT NULL,            -- canonical JSON array of strings, e.g. ["a","b"]
///     source TEXT,                   -- NULL when unknown
///     content_hash TEXT NOT NULL,    -- hex SHA-256 of content's UTF-8 bytes
///     metadata_hash TEXT NOT NULL,   -- hex SHA-256 of canonical JSON {scenario,source,tags,title}
///     embedding BLOB NOT NULL,       -- dimension × float32, little-endian
///     embedding_hash TEXT NOT NULL   -- hex SHA-256 of the embedding blob
/// );
/// CREATE VIRTUAL TABLE chunks_fts USING fts5(title, content, content='chunks',
///     content_rowid='rowid', tokenize='porter unicode61 remove_diacritics 2');
/// ```
/// The stored hashes are a convenience: a reader verifies them against the data
/// (`Snapshot.records(at:)`) before it trusts a file.
public enum SnapshotSchema {
    /// `PRAGMA application_id`: marks the file as a Cairn snapshot ('Carn').
    public static let applicationID: Int32 = 0x4361_726E
    /// `PRAGMA user_version`: the schema revision within `cairn-snapshot-1`.
    public static let userVersion: Int32 = 1

    static let pragmas = """
        PRAGMA page_size = 4096;
        PRAGMA journal_mode = DELETE;
        PRAGMA application_id = \(applicationID);
        PRAGMA user_version = \(userVersion);
        """

    static let tables = """
        CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE chunks(
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            title TEXT NOT NULL,
            content TEXT NOT NULL,
            scenario TEXT,
            tags TEXT NOT NULL,
            source TEXT,
            content_hash TEXT NOT NULL,
            metadata_hash TEXT NOT NULL,
            embedding BLOB NOT NULL,
            embedding_hash TEXT NOT NULL
        );
        CREATE VIRTUAL TABLE chunks_fts USING fts5(
            title, content,
            content = 'chunks', content_rowid = 'rowid',
            tokenize = 'porter unicode61 remove_diacritics 2'
        );
        """

    /// The columns that rebuild a `Chunk`, in this order.
    static let chunkColumns = "id, title, content, scenario, tags, source"
}
