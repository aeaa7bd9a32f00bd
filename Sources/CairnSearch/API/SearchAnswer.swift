import CairnCore
public import CairnIndex

/// The body of a successful search (cairnd's `POST /v1/search`, cairn-server's
/// `POST /v1/channels/<c>/search`): CairnIndex's `SearchResponse` plus the sync flags and the
/// embedding time. Codable with snake_case keys (protocol/socket-api.md).
public struct SearchAnswer: Sendable, Hashable, Codable {
    public struct Timings: Sendable, Hashable, Codable {
        public var embedMilliseconds: Double
        public var lexicalMilliseconds: Double
        public var denseMilliseconds: Double
        public var totalMilliseconds: Double

        enum CodingKeys: String, CodingKey {
            case embedMilliseconds = "embed_ms", lexicalMilliseconds = "lexical_ms"
            case denseMilliseconds = "dense_ms", totalMilliseconds = "total_ms"
        }
    }

    public var results: [SearchResult]
    public var version: Int
    public var stateRoot: String
    public var mode: SearchRequest.Mode
    public var fusion: SearchResponse.Fusion
    /// Whether the serving version has a usable model (false: every answer is lexical only),
    /// also when this request asked for lexical mode.
    public var denseAvailable: Bool
    public var online: Bool?
    public var stale: Bool?
    /// Whether the serving version's manifest is past its `expires`, and when that is.
    public var expired: Bool?
    public var expires: String?
    public var timings: Timings
    /// With several channels searched: each one's version and flags (absent otherwise).
    public var channels: [ChannelVersion]?
    /// The filter values no chunk carries (over several channels: none of them), absent when
    /// every value names some chunk (protocol/socket-api.md, `unmatched_filter`).
    public var unmatchedFilter: SearchResponse.UnmatchedFilter?
    /// The hybrid moments of the search (not on the wire; see `HybridMoments`).
    public var hybridMoments: HybridMoments? = nil

    /// One searched channel in a several-channel answer.
    public struct ChannelVersion: Sendable, Hashable, Codable {
        public var channel: String
        public var version: Int
        public var stateRoot: String
        public var online: Bool?
        public var stale: Bool?
        public var expired: Bool?
        /// How this channel's answer was ranked, and whether its version has a usable model: a
        /// channel without one answers lexically whatever the request's mode (optional: a
        /// cairnd before 2026-12-06 did not send them).
        public var mode: SearchRequest.Mode?
        public var fusion: SearchResponse.Fusion?
        public var denseAvailable: Bool?

        enum CodingKeys: String, CodingKey {
            case channel, version, online, stale, expired, mode, fusion
            case stateRoot = "state_root", denseAvailable = "dense_available"
        }
    }

    /// The freshness flags every answer carries (nil: unknown or not applicable).
    public struct Flags: Sendable {
        public var online: Bool?
        public var stale: Bool?
        public var expired: Bool?
        public var expires: String?

        public init(online: Bool? = nil, stale: Bool? = nil, expired: Bool? = nil, expires: String? = nil) {
            self.online = online
            self.stale = stale
            self.expired = expired
            self.expires = expires
        }
    }

    public init(_ response: SearchResponse, denseAvailable: Bool, flags: Flags,
                embedMilliseconds: Double, totalMilliseconds: Double) {
        results = response.results
        version = response.version
        stateRoot = response.stateRoot
        mode = response.mode
        fusion = response.fusion
        self.denseAvailable = denseAvailable
        online = flags.online
        stale = flags.stale
        expired = flags.expired
        expires = flags.expires
        hybridMoments = response.hybridMoments
        unmatchedFilter = response.unmatchedFilter
        timings = Timings(embedMilliseconds: embedMilliseconds, lexicalMilliseconds: response.timings.lexicalMilliseconds,
                          denseMilliseconds: response.timings.denseMilliseconds, totalMilliseconds: totalMilliseconds)
    }

    enum CodingKeys: String, CodingKey {
        case results, version, mode, fusion, online, stale, expired, expires, timings, channels
        case stateRoot = "state_root", denseAvailable = "dense_available", unmatchedFilter = "unmatched_filter"
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(results, forKey: .results)
        try c.encode(version, forKey: .version)
        try c.encode(stateRoot, forKey: .stateRoot)
        try c.encode(mode, forKey: .mode)
        try c.encode(fusion, forKey: .fusion)
        try c.encode(denseAvailable, forKey: .denseAvailable)
        try c.encode(online, forKey: .online)
        try c.encode(stale, forKey: .stale)
        try c.encode(expired, forKey: .expired)
        try c.encode(expires, forKey: .expires)
        try c.encode(timings, forKey: .timings)
        try c.encodeIfPresent(channels, forKey: .channels)
        try c.encodeIfPresent(unmatchedFilter, forKey: .unmatchedFilter)
    }
}
