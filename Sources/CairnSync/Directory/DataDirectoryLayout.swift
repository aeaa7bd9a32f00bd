import CairnIndex

/// The names of the data directory's parts (protocol/data-directory.md), spelled once:
///
///     DIR/lock, DIR/state.json
///     DIR/current -> versions/<n>, DIR/previous -> versions/<m>, [DIR/newer -> versions/<k>]
///     DIR/versions/<n>/{index.sqlite, index.rows, [index.overlay], manifest.json,
///                       model -> ../../models/<name>, snapshot.blob | delta.blob}
///     DIR/models/<name>/, DIR/staging/, DIR/roots/<n>.root.json
public enum DataDirectoryLayout {
    public static let lockFile = "lock"
    public static let stateFile = "state.json"
    /// The links to the version being served and to the rollback target.
    public static let currentLink = "current"
    public static let previousLink = "previous"
    /// The link to a version a newer cairnd installed, which this build does not read (a
    /// downgrade): kept until the upgrade back serves it, or an install supersedes it.
    public static let newerLink = "newer"
    public static let versionsFolder = "versions"
    public static let modelsFolder = "models"
    public static let stagingFolder = "staging"
    /// Every root the device accepted, `roots/<n>.root.json` (protocol/root.md).
    public static let rootsFolder = "roots"

    // In a version folder:
    /// The snapshot file (SQLite) the version serves.
    public static let indexFile = "index.sqlite"
    /// The signed manifest the version was installed from.
    public static let manifestFile = "manifest.json"
    /// The link to the version's model folder under `models/`.
    public static let modelLink = "model"
    /// The rows files beside the index (protocol/data-directory.md, "Rows files"): what the
    /// query path maps instead of reading every row. The base may be a hard link shared with the
    /// version a delta came from; the overlay holds the rows the deltas since that base changed.
    public static let rowsFile = IndexContents.basePath(beside: indexFile)
    public static let overlayRowsFile = IndexContents.overlayPath(beside: indexFile)
    /// The verified compressed snapshot kept in a version folder installed from it.
    public static let snapshotBlobFile = "snapshot.blob"
    /// The verified compressed delta a version was installed by (from the version then current).
    public static let deltaBlobFile = "delta.blob"
    /// A copy of the version's index kept after a full install, which the next delta moves and
    /// applies to in place instead of copying the live file then (data-directory.md, "Spare").
    public static let spareIndexFile = "spare.sqlite"
    /// `DIR/failed-read`: the path of a mapped file whose read stopped the last run (a bad
    /// sector), written by the SIGBUS handler and acted on at the next start (`FailedRead`).
    public static let failedReadFile = "failed-read"

    /// `versions/<n>.replaced`: a version folder an install of the same number moved aside (it may
    /// still serve until the new one is handed over); removed with unreferenced versions.
    public static let replacedSuffix = ".replaced"

    /// `<n>.root.json`: a root's file name, in `DIR/roots/` and in a repository's `root/`.
    public static func rootFile(_ version: Int) -> String { "\(version).root.json" }

    /// `versions/<n>`, relative to the data directory (what the links point at).
    public static func versionFolder(_ version: Int) -> String { "\(versionsFolder)/\(version)" }

    /// The version a folder's name gives (`versions/7`: 7), the inverse of `versionFolder`; nil
    /// for another name.
    public static func versionNumber(of folder: String) -> Int? { folder.split(separator: "/").last.flatMap { Int($0) } }
}
