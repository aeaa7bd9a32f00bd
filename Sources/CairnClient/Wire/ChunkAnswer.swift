public import CairnCore
import Foundation

/// The body of `GET /v1/chunks/{id}`: the chunk's fields plus the version it came from.
public struct ChunkAnswer: Sendable, Hashable, Codable {
    public var chunk: Chunk
    public var version: Int
    public var stateRoot: String
    /// The channel it came from (nil from a cairnd before 2026-12-05).
    public var channel: String?

    enum CodingKeys: String, CodingKey { case version, stateRoot = "state_root", channel }

    /// `/v1/chunks/<id>` with the id percent-encoded, `/` included (the route is one segment),
    /// and `?channel=` when one is named.
    public static func path(for id: String, channel: String? = nil, version: Int? = nil) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove("/")
        let path = "/v1/chunks/" + (id.addingPercentEncoding(withAllowedCharacters: allowed) ?? id)
        let query = (channel.map { ["channel=" + ($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0)] } ?? [])
            + (version.map { ["version=\($0)"] } ?? [])
        return query.isEmpty ? path : path + "?" + query.joined(separator: "&")
    }

    /// The message of 409 `version_changed`: the chunk was asked for as of version `pinned`,
    /// and `serving` answers. Clients say the same when a cairnd from before 2026-12-06, which
    /// ignores `?version=`, answers from another version.
    public static func versionChanged(pinned: Int, serving: Int) -> String {
        "version \(pinned) no longer answers (version \(serving) does): search again for the passage as it is now"
    }

    public init(chunk: Chunk, version: Int, stateRoot: String, channel: String? = nil) {
        self.chunk = chunk
        self.version = version
        self.stateRoot = stateRoot
        self.channel = channel
    }

    public init(from decoder: any Decoder) throws {
        chunk = try Chunk(from: decoder)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        version = try c.decode(Int.self, forKey: .version)
        stateRoot = try c.decode(String.self, forKey: .stateRoot)
        channel = try c.decodeIfPresent(String.self, forKey: .channel)
    }

    public func encode(to encoder: any Encoder) throws {
        try chunk.encode(to: encoder)
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(version, forKey: .version)
        try c.encode(stateRoot, forKey: .stateRoot)
        try c.encodeIfPresent(channel, forKey: .channel)
    }
}
