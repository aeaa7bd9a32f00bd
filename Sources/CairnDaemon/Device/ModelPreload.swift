import CairnEmbedding
import CairnThreads
import Synchronization

/// The model of the version an install is building, loaded on a thread of its own while the
/// install downloads and checks the index (the syncer's `onModel`), so that the new version
/// answers dense queries from the moment it is swapped in instead of loading the model then
/// (the last step before a fresh device's first answer). Started only when the serving version
/// uses another model folder (otherwise its embedder is reused); one at a time. A load whose
/// install failed stays until an install takes it or starts another (the next attempt at the
/// same version takes it): forgetting it when an attempt ends could race with the next
/// attempt, which a sync request may start at once.
final class ModelPreload: Sendable {
    private struct Loading: Sendable {
        let folder: String
        /// `SentenceEmbedder.filesIdentity(of: folder)` when the load started.
        let files: String
        let work: BackgroundWork.Pending<SentenceEmbedder?>
    }

    private let loading = Mutex<Loading?>(nil)

    /// Starts loading the model in `folder` (resolved), unless it is loading already from the
    /// files the folder holds now.
    func start(folder: String) {
        let files = SentenceEmbedder.filesIdentity(of: folder)
        loading.withLock { current in
            guard current?.folder != folder || current?.files != files else { return }
            current = Loading(folder: folder, files: files, work: BackgroundWork.Pending { try? SentenceEmbedder(directory: folder) })
        }
    }

    /// The model loaded from `folder`, once its load has ended (nil when none was started for
    /// that folder, or it failed: the caller then loads it and reports why). Forgets it.
    func take(folder: String?) -> SentenceEmbedder? {
        let files = folder.map(SentenceEmbedder.filesIdentity(of:))
        let taken = loading.withLock { current -> Loading? in
            guard let folder, let loading = current, loading.folder == folder else { return nil }
            current = nil
            // A load of files since replaced (a damaged folder downloaded again) is not waited for.
            return loading.files == files ? loading : nil
        }
        return taken?.work.wait()
    }
}
