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
/// its version loaded on the search thread, once (other searches of the channel wait for it),
/// and swapped in. A manifest that cannot be loaded is logged once and the last good version
/// keeps answering.
final class OnlineSearch: Sendable {
    let endpoint: SearchEndpoint
    private let root: RepositoryRoot
    private let cache: VersionCache
    private let logger: Logger
    private let channels = Mutex<[String: ChannelState]>([:])

    init(root: RepositoryRoot, cache: VersionCache, endpoint: SearchEndpoint, logger: Logger) {
        self.root = root
        self.cache = cache
        self.endpoint = endpoint
        self.logger = logger
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
    private let checked = Mutex<[Int]?>(nil)
    /// Serialises loads: one search loads a new version, the others wait for it.
    private let loading = Mutex(())

    init(channel: String) {
        self.channel = channel
        holder = IndexHolder(logger: Logger(label: "cairn.server.search"))
    }

    func version(for file: RepositoryRoot.Resolved, cache: VersionCache, logger: Logger) throws(APIError) -> ServingVersion {
        if let fresh = try current(ifCheckedAgainst: file.identity) { return fresh }
        return try loading.withLock { _ throws(APIError) -> ServingVersion in
            if let fresh = try current(ifCheckedAgainst: file.identity) { return fresh }
            do {
                let bytes = try FileSystem.read(file.path)
                let previous = holder.current
                if previous?.manifest != bytes {
                    holder.install(try cache.load(channel: channel, manifestBytes: bytes, reusing: previous))
                }
            } catch {
                logger.error("online search cannot load the channel's newest version; the last good one keeps answering",
                             metadata: ["cairn.channel": "\(channel)", "cairn.error": "\(error)"])
            }
            checked.withLock { $0 = file.identity }
            guard let serving = holder.current else { throw Self.unavailable }
            return serving
        }
    }

    /// The version serving now if the manifest was last checked at this identity; throws
    /// when that check failed and nothing serves; nil when the manifest must be (re)checked.
    private func current(ifCheckedAgainst identity: [Int]) throws(APIError) -> ServingVersion? {
        guard checked.withLock({ $0 }) == identity else { return nil }
        guard let serving = holder.current else { throw Self.unavailable }
        return serving
    }

    static let unavailable = APIError(503, "no_index",
                                      "the channel's newest version cannot be loaded for search; see the server's log")
}
