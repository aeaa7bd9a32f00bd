public import CairnEmbedding
public import CairnIndex
public import Logging

extension ServingVersion {
    /// The embedder for `index` from the model folder `modelFolder` (resolved), or nil (lexical
    /// only, logged at warning) when there is none, it cannot be loaded, or its dimension
    /// differs from the index's.
    /// - Parameters:
    ///   - reusing: a version whose embedder is reused when it came from the same folder (a
    ///     model is shared across versions; loading it again costs seconds), and from the files
    ///     it holds now (not from a folder since removed as damaged and downloaded again).
    ///   - preloaded: the embedder already loaded from `modelFolder` while the version installed.
    public static func embedder(for index: SearchIndex, modelFolder: String?, reusing: ServingVersion?,
                                preloaded: SentenceEmbedder? = nil, logger: Logger) -> SentenceEmbedder? {
        let version: Logger.Metadata = ["cairn.snapshot.version": "\(index.meta.version)"]
        guard let modelFolder else {
            logger.warning("the version has no model: answers are lexical only", metadata: version)
            return nil
        }
        if let reusing, reusing.modelDirectory == modelFolder, let embedder = reusing.embedder,
           embedder.dimension == index.meta.dimension, embedder.isLoaded(from: modelFolder) {
            return embedder
        }
        if let preloaded, preloaded.dimension == index.meta.dimension, preloaded.isLoaded(from: modelFolder) { return preloaded }
        do {
            let embedder = try SentenceEmbedder(directory: modelFolder)
            guard embedder.dimension == index.meta.dimension else {
                logger.warning("the model's dimension differs from the index's: answers are lexical only", metadata: version)
                return nil
            }
            return embedder
        } catch {
            logger.warning("the model cannot be loaded: answers are lexical only",
                           metadata: version.merging(["cairn.error": "\(error)"]) { $1 })
            return nil
        }
    }
}
