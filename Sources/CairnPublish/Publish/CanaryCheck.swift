import CairnCore
import CairnEmbedding
import CairnIndex

/// Runs the canaries against the new version's own index before anything is written.
enum CanaryCheck {
    static func run(_ canaries: [Canary], snapshotPath: String, embedder: SentenceEmbedder, version: Int) throws(PublishError) {
        guard !canaries.isEmpty else { return }
        let index: SearchIndex
        do { index = try SearchIndex(path: snapshotPath) } catch {
            throw PublishError(.io, "cannot open the new snapshot for the canary check: \(error.message)", cause: error)
        }
        // As the device judges them (`SearchIndex.passes`): each in its mode, `k` at most 100.
        for (number, canary) in canaries.enumerated() {
            let request = SearchIndex.request(for: canary)
            let vector = request.mode == .lexical ? nil : embedder.embed(canary.query)
            guard index.passes(canary, queryVector: vector) else {
                throw PublishError(.canaryFailed, "canary #\(number + 1) (expects \(canary.expect.joined(separator: ", ")) "
                                   + "in the top \(request.k), \(request.mode.rawValue)) fails against version \(version); nothing was published")
            }
        }
    }
}
