public import CairnCore
import Foundation

/// The body of `GET /v1/chunks/{id}`: the chunk's fields plus the version it came from.
public struct ChunkAnswer: Sendable, Hashable, Codable {
    public var chunk: Chunk
    public var version: Int
    public var stateRoot: String

    enum CodingKeys: String, CodingKey { case version, stateRoot = "state_root" }

    /// `/v1/chunks/<id>` with the id percent-encoded, `/` included (the route is one segment).
    public static func path(for id: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove("/")
        return "/v1/chunks/" + (id.addingPercentEncoding(withAllowedCharacters: allowed) ?? id)
    }

    public init(chunk: Chunk, version: Int, stateRoot: String) {
        self.chunk = chunk
        self.version = version
        self.stateRoot = stateRoot
    }

    public init(from decoder: any Decoder) throws {
        chunk = try Chunk(from: decoder)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        version = try c.decode(Int.self, forKey: .version)
        stateRoot = try c.decode(String.self, forKey: .stateRoot)
    }

    public func encode(to encoder: any Encoder) throws {
        try chunk.encode(to: encoder)
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(version, forKey: .version)
        try c.encode(stateRoot, forKey: .stateRoot)
    }
}
