import CairnStore
import Foundation
public import Logging

/// What the start after a run stopped by a failed read of a mapped file does (`MappedFiles`,
/// protocol/data-directory.md, "A failed read"). A bad sector stays bad: mapped again, the file
/// would stop this run too, and the supervisor's restarts would never end. So a file that cairnd
/// can make again is removed first: a rows file (every link to it, since versions share them),
/// written again from the index when the version is opened, or a model folder, which the next
/// sync fetches again (lexical search only until then). Anything else is left as it is.
public enum FailedRead {
    /// Reads `marker`, acts on the path it names, logs one line, and removes it. Nothing happens
    /// when there is no marker.
    /// A data directory another process holds (a second cairnd started by mistake, which exits
    /// `locked` once it tries the lock) is not acted in: the files there are mapped by the
    /// cairnd that holds it, and the marker is left for it.
    public static func resolve(marker: String, dataDirectories: [String], logger: Logger) {
        guard let bytes = try? FileSystem.read(marker) else { return }
        if let held = dataDirectories.first(where: DataDirectory.isLockedByAnother) {
            logger.notice("another process holds the data directory \(held); the failed-read marker is left for it")
            return
        }
        defer { unlink(marker) }
        let path = String(decoding: bytes, as: UTF8.self)
        let action = remove(path, dataDirectories: dataDirectories.map { URL(fileURLWithPath: $0).resolvingSymlinksInPath().path })
        logger.error("the last run stopped on a failed read of \(path) (a disk error, or the file cut short while mapped); \(action)")
    }

    static func remove(_ path: String, dataDirectories: [String]) -> String {
        // The longest: a further channel's data directory may lie inside the main one.
        guard let directory = dataDirectories.filter({ path.hasPrefix($0 + "/") }).max(by: { $0.count < $1.count }) else {
            return "it is not in a data directory; left as it is"
        }
        let name = (path as NSString).lastPathComponent
        if name == DataDirectoryLayout.rowsFile || name == DataDirectoryLayout.overlayRowsFile {
            var failed = stat()
            if stat(path, &failed) == 0 {
                let versions = directory + "/" + DataDirectoryLayout.versionsFolder
                for version in (try? FileManager.default.contentsOfDirectory(atPath: versions)) ?? [] {
                    for file in [DataDirectoryLayout.rowsFile, DataDirectoryLayout.overlayRowsFile] {
                        let link = versions + "/" + version + "/" + file
                        var info = stat()
                        if stat(link, &info) == 0, info.st_ino == failed.st_ino, info.st_dev == failed.st_dev { unlink(link) }
                    }
                }
            }
            unlink(path)
            return "removed it (every link to it): it is written again from the index"
        }
        let models = directory + "/" + DataDirectoryLayout.modelsFolder + "/"
        if path.hasPrefix(models), let folder = path.dropFirst(models.count).split(separator: "/").first {
            // Costly to fetch again (and not until a version with that model installs): only
            // when the file still does not read whole.
            guard (try? FileSystem.sha256(of: path, fromDisk: true)) == nil else {
                return "it reads whole now; left as it is"
            }
            try? FileManager.default.removeItem(atPath: models + folder)
            return "it still does not read: removed its model folder, which the next install of a version using it fetches again (lexical search only until then)"
        }
        return "left as it is"
    }
}
