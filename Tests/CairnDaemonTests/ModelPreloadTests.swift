@testable import CairnDaemon
import CairnEmbedding
import CairnIndex
import CairnSearch
import CairnTestSupport
import Foundation
import Logging
import Testing

/// The model of the version an install builds, loaded while the index is built (`ModelPreload`,
/// fed by the syncer's `onModel`), and used when the version is opened.
@Suite("The new version's model loads during its install")
struct ModelPreloadTests {
    @Test("Given a load started for a model folder, when that folder is taken, then the model loaded from it is handed over once")
    func takenOnce() throws {
        let folder = try TinyModel(seed: 7).writeFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let preload = ModelPreload()
        preload.start(folder: folder)
        let loaded = try #require(preload.take(folder: folder))
        #expect(loaded.dimension == (try SentenceEmbedder(directory: folder)).dimension)
        #expect(preload.take(folder: folder) == nil)
    }

    @Test("Given a load for another folder, when a version with no model or this folder is opened, then nothing is handed over and the load is kept for its own folder; a load for a third folder replaces it")
    func otherFolder() throws {
        let (first, second) = (try TinyModel(seed: 7).writeFolder(), try TinyModel(seed: 8).writeFolder())
        defer { for folder in [first, second] { try? FileManager.default.removeItem(atPath: folder) } }
        let preload = ModelPreload()
        preload.start(folder: first)
        #expect(preload.take(folder: second) == nil)
        #expect(preload.take(folder: nil) == nil)
        #expect(preload.take(folder: first) != nil)
        preload.start(folder: second)
        preload.start(folder: first)
        #expect(preload.take(folder: second) == nil)
        #expect(preload.take(folder: first) != nil)
    }

    @Test("Given a preloaded embedder of the index's dimension, when the version is opened with no version to reuse, then it serves with that embedder rather than loading another")
    func openedWithThePreloaded() throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(1)
        let loaded = try fixture.serving(1)
        let index = loaded.index
        let folder = try #require(loaded.modelDirectory)
        let preloaded = try SentenceEmbedder(directory: folder)
        let embedder = ServingVersion.embedder(for: index, modelFolder: folder, reusing: nil, preloaded: preloaded,
                                               logger: Logger(label: "test"))
        #expect(embedder === preloaded)
        let version = try VersionLoader.load(dataDirectory: fixture.dataDirectory, preloaded: preloaded,
                                             logger: Logger(label: "test"))
        #expect(version.embedder === preloaded)
    }
}
