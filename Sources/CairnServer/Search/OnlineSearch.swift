import CairnCore
import CairnSearch
import CairnStore
import Foundation
import Logging
import Synchronization

/// Online search for thin clients: `POST /v1/channels/<c>/search` answered from the channel's
/// newest version with the daemon's engine and JSON (protocol/online-search.md).
///
/// Each searched channel keeps its newest version open (index and model in memory). Every
/// search compares the manifest file's identity (`stat`: inode, size, times) with the one it
/// was loaded from, which costs one `stat`; when it changed, the new manifest is verified and
/// its version loaded on the search thread, once, and swapped in: that search waits for it,
/// the channel's others answer from the version serving meanwhile (or, with none yet, wait).
/// A manifest that cannot be loaded is logged, the last good version keeps answering, and the
/// load is tried again after 5 s, doubling to 10 minutes, while the manifest stays the same.
final class OnlineSearch: Sendable {
    let endpoint: SearchEndpoint
    private let root: RepositoryRoot
    private let cache: VersionCache
    private let logger: Logger
    private let channels = Mutex<[String: ChannelState]>([:])
    /// `search_allow_origin`: web origins whose pages may read the answers.
    private let allowOrigins: [String]

    init(root: RepositoryRoot, cache: VersionCache, endpoint: SearchEndpoint, allowOrigins: [String] = [], logger: Logger) {
        self.root = root
        self.cache = cache
        self.endpoint = endpoint
        self.allowOrigins = allowOrigins
        self.logger = logger
    }

    /// The `Access-Control-Allow-Origin` value for a request from `origin` (its `Origin`
    /// header): `*` when any origin is allowed, the origin itself when listed, else nil.
    func allowedOrigin(_ origin: String?) -> String? {
        if allowOrigins.contains("*") { return "*" }
        guard let origin = origin?.lowercased(), allowOrigins.contains(origin) else { return nil }
        return origin
    }

    /// The version to search for `channel`, loading its newest first when the manifest
    /// changed. Blocking: called on a `SearchPool` thread.
    func version(channel: String) throws(APIError) -> ServingVersion {
        guard Manifest.isValidChannelName(channel), let file = root.resolve("channels/\(channel)/manifest.json") else {
            throw APIError(404, "channel_not_found", "this repository has no channel by that name")
        }
        let state = channels.withLock { channels in
            if let state = channels[channel] { return state }
            let state = ChannelState(channel: channel)
            channels[channel] = state
            return state
        }
        return try state.version(for: file, cache: cache, logger: logger)
    }
}

/// One channel's searchable version and the manifest identity it was checked against.
private final class ChannelState: Sendable {
    let channel: String
    private let holder: IndexHolder
    /// The manifest identity last checked (loaded, or found unusable and logged).
    private struct Check {
        var identity: [Int]
        /// When a failed load may be tried again; nil: it loaded.
        var retryAt: ContinuousClock.Instant?
        /// The wait after the next failure with the manifest unchanged (a blob that arrives
        /// after its manifest, a search cache disk that was full), doubling to `maxRetry`.
        var nextDelay: Duration
    }
    private let checked = Mutex<Check?>(nil)
    static let firstRetry = Duration.seconds(5)
    static let maxRetry = Duration.seconds(600)
    /// Serialises loads: one search loads a new version.
    private let loading = Mutex(())

    init(channel: String) {
        self.channel = channel
        holder = IndexHolder(logger: Logger(label: "cairn.server.search"))
    }

    func version(for file: RepositoryRoot.Resolved, cache: VersionCache, logger: Logger) throws(APIError) -> ServingVersion {
        if let fresh = try current(ifCheckedAgainst: file.identity) { return fresh }
        if let loaded = try loading.withLockIfAvailable({ _ throws(APIError) -> ServingVersion in
            try load(file, cache: cache, logger: logger)
        }) {
            return loaded
        }
        // Another search is loading the new version: the one serving answers meanwhile, so that
        // one search thread waits for the load, not every search of the channel (which held
        // the shared pool's threads, and so stalled every other channel's searches). With
        // nothing serving yet (the first load after a start: minutes at a million chunks), the
        // search is refused at once for the same reason, rather than wait on a pool thread.
        if let serving = holder.current { return serving }
        // A load that failed says so (503 no_index, "cannot be loaded"); one still running, that
        // it runs. Not waited for: a wait, however short, holds a thread of the pool all
        // channels share, once per search that comes meanwhile.
        if let fresh = try current(ifCheckedAgainst: file.identity) { return fresh }
        throw Self.firstLoad
    }

    /// Loads the newest version if the manifest still needs a check (under `loading`).
    private func load(_ file: RepositoryRoot.Resolved, cache: VersionCache, logger: Logger) throws(APIError) -> ServingVersion {
        if let fresh = try current(ifCheckedAgainst: file.identity) { return fresh }
        var check = Check(identity: file.identity, retryAt: nil, nextDelay: Self.firstRetry)
        do {
            let bytes = try FileSystem.read(file.path)
            let previous = holder.current
            if previous?.manifest != bytes {
                holder.install(try cache.load(channel: channel, manifestBytes: bytes, reusing: previous))
            }
        } catch {
            // Backs off while the same manifest keeps failing; a new manifest starts again.
            let last = checked.withLock { $0 }
            let delay = last?.identity == file.identity ? last?.nextDelay ?? Self.firstRetry : Self.firstRetry
            check.retryAt = .now + delay
            check.nextDelay = min(delay * 2, Self.maxRetry)
            logger.error("online search cannot load the channel's newest version; the last good one keeps answering; tried again in \(delay.components.seconds) s",
                         metadata: ["cairn.channel": "\(channel)", "cairn.error": "\(error)"])
        }
        checked.withLock { $0 = check }
        guard let serving = holder.current else { throw Self.unavailable }
        return serving
    }

    /// The version serving now if the manifest was last checked at this identity (and a failed
    /// load is not due again); throws when that check failed and nothing serves; nil when the
    /// manifest must be (re)checked.
    private func current(ifCheckedAgainst identity: [Int]) throws(APIError) -> ServingVersion? {
        guard let last = checked.withLock({ $0 }), last.identity == identity else { return nil }
        if let retryAt = last.retryAt, ContinuousClock.now >= retryAt { return nil }
        guard let serving = holder.current else { throw Self.unavailable }
        return serving
    }

    static let unavailable = APIError(503, "no_index",
                                      "the channel's newest version cannot be loaded for search; see the server's log")
    static let firstLoad = APIError(503, "no_index",
                                    "the channel's version is being loaded for search (minutes for a large one); try again shortly")
}
