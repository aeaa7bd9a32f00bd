public import CairnEmbedding
public import CairnIndex
public import CairnSearch
public import CairnSync
import Foundation
public import Logging

/// Opens the version a data directory's `current` (or `previous`) link points at:
/// `DIR/current -> versions/<n>/{index.sqlite, manifest.json, model -> ../../models/<name>}`.
///
/// Nothing heavy is verified here (CairnSync verifies before it swaps the link); the loader
/// checks that the index opens and that its meta's version is the folder's name. A missing or
/// unusable model gives a lexical-only version, logged at warning.
public enum VersionLoader {
    /// The version behind `DIR/<link>` (`current` by default).
    /// - Parameters:
    ///   - reusing: a version whose embedder is reused when both resolve to the same model
    ///     folder (a model is shared across versions; loading it again costs seconds).
    ///   - contents: the index's rows as the install's verifying pass loaded them, used instead
    ///     of reading them again when they belong to the file `link` names (else read).
    public static func load(dataDirectory: String, link: String = DataDirectoryLayout.currentLink, reusing: ServingVersion? = nil,
                            contents: IndexContents? = nil, configuration: RankingConfiguration = RankingConfiguration(),
                            preloaded: SentenceEmbedder? = nil, logger: Logger) throws(DaemonError) -> ServingVersion {
        let linkPath = (dataDirectory as NSString).appendingPathComponent(link)
        guard let folder = resolve(linkPath) else {
            throw DaemonError(.noIndex, "no version is installed (\(link) is absent in the data directory)")
        }
        let name = (folder as NSString).lastPathComponent
        guard let expected = Int(name) else {
            throw DaemonError(.versionUnusable, "\(link) points at a folder whose name is not a version number")
        }
        let path = (folder as NSString).appendingPathComponent(DataDirectoryLayout.indexFile)
        let index: SearchIndex
        do {
            if let contents, let preloaded = try? SearchIndex(path: path, configuration: configuration, contents: contents) {
                index = preloaded
            } else {
                index = try SearchIndex(path: path, configuration: configuration)
            }
        } catch {
            throw DaemonError(.versionUnusable, "version \(expected) cannot be opened: \(error.message)", cause: error)
        }
        guard index.meta.version == expected else {
            throw DaemonError(.versionUnusable,
                              "version folder \(expected) holds an index of version \(index.meta.version); reinstall it")
        }
        let manifest = FileManager.default.contents(atPath: (folder as NSString).appendingPathComponent(DataDirectoryLayout.manifestFile))
        let modelDirectory = resolve((folder as NSString).appendingPathComponent(DataDirectoryLayout.modelLink))
        let embedder = ServingVersion.embedder(for: index, modelFolder: modelDirectory, reusing: reusing,
                                               preloaded: preloaded, logger: logger)
        return ServingVersion(index: index, embedder: embedder, manifest: manifest.map(Array.init) ?? [],
                              directory: folder, modelDirectory: embedder == nil ? nil : modelDirectory)
    }

    /// `current`, or `previous` when `current` is absent or unusable (logged).
    public static func loadNewest(dataDirectory: String, configuration: RankingConfiguration = RankingConfiguration(),
                                  logger: Logger) throws(DaemonError) -> ServingVersion {
        do {
            return try load(dataDirectory: dataDirectory, configuration: configuration, logger: logger)
        } catch let error where error.code == .versionUnusable {
            logger.error("the current version is unusable; trying the previous one", metadata: ["cairn.error": "\(error)"])
            return try load(dataDirectory: dataDirectory, link: DataDirectoryLayout.previousLink, configuration: configuration, logger: logger)
        }
    }

    /// The canonical path `path` resolves to, or nil when it does not exist.
    static func resolve(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
