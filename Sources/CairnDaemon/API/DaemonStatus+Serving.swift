import CairnClient
import CairnIndex
import CairnSearch

extension DaemonStatus {
    /// The status body for the version being served (nil before the first install, or while
    /// an installed one cannot be served, which `not_serving` then says).
    init(serving: ServingVersion?, dataDirectory: String, dataDirectoryBytes: Int64, syncAvailable: Bool, sync: Sync) {
        self.init(installed: serving != nil, version: serving?.version, stateRoot: serving?.stateRoot,
                  channel: serving?.index.meta.channel, chunkCount: serving?.index.count,
                  modelID: serving?.index.meta.modelID, dimension: serving?.index.meta.dimension,
                  modelLoaded: serving?.embedder != nil, lexicalOnly: !(serving?.denseAvailable ?? false),
                  dataDirectory: dataDirectory, dataDirectoryBytes: dataDirectoryBytes, syncAvailable: syncAvailable,
                  sync: sync)
        denseSearch = serving.map { $0.index.narrowsDense ? "narrowed" : "flat" }
        rows = serving.map { Rows(source: $0.index.rowsSource.rawValue, overlayRows: $0.index.contents.overlayCount,
                                  removedRows: $0.index.contents.removedCount) }
    }
}
