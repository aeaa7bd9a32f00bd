public import CairnIndex
import CairnCore
import Foundation

/// The body of `POST /v1/search`, decoded strictly: unknown keys and wrong types are refused
/// with the API's stable codes (thrown as `APIError`), so a typo never silently changes a query.
public struct SearchBody: Decodable {
    public static let maximumQueryBytes = 4096
    public var request: SearchRequest
    /// The channels to search (cairnd with several channels); nil: every channel.
    public var channels: [String]?

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
        init(_ name: String) { stringValue = name }
    }

    private static let topLevelKeys: Set<String> = ["query", "k", "mode", "filter", "min_similarity", "channels"]
    private static let filterKeys: Set<String> = ["scenario", "tags"]

    public init(from decoder: any Decoder) throws {
        guard let c = try? decoder.container(keyedBy: Key.self) else { throw APIError.badJSON("the body must be a JSON object") }
        try Self.refuseUnknown(c.allKeys, allowed: Self.topLevelKeys, in: "the request")
        guard c.contains(Key("query")) else { throw APIError(400, "missing_field", "the request has no \"query\"") }
        guard let query = try? c.decode(String.self, forKey: Key("query")) else { throw APIError.badJSON("\"query\" must be a string") }
        var request = SearchRequest(query: query)
        if c.contains(Key("k")), try !c.decodeNil(forKey: Key("k")) {
            guard let k = try? c.decode(Int.self, forKey: Key("k")), SearchRequest.kRange.contains(k) else {
                throw APIError(400, "bad_k", "\"k\" must be an integer from 1 to 100")
            }
            request.k = k
        }
        if c.contains(Key("mode")), try !c.decodeNil(forKey: Key("mode")) {
            guard let raw = try? c.decode(String.self, forKey: Key("mode")), let mode = SearchRequest.Mode(rawValue: raw) else {
                throw APIError(400, "bad_mode", "\"mode\" must be one of hybrid, lexical, dense, rrf")
            }
            request.mode = mode
        }
        if c.contains(Key("min_similarity")), try !c.decodeNil(forKey: Key("min_similarity")) {
            guard let value = try? c.decode(Double.self, forKey: Key("min_similarity")), value.isFinite, (-1...1).contains(value) else {
                throw APIError(400, "bad_min_similarity", "\"min_similarity\" must be a number from -1 to 1")
            }
            request.minSimilarity = Float(value)
        }
        if c.contains(Key("filter")), try !c.decodeNil(forKey: Key("filter")) {
            guard let filter = try? c.nestedContainer(keyedBy: Key.self, forKey: Key("filter")) else {
                throw APIError.badJSON("\"filter\" must be an object")
            }
            try Self.refuseUnknown(filter.allKeys, allowed: Self.filterKeys, in: "\"filter\"")
            if filter.contains(Key("scenario")), try !filter.decodeNil(forKey: Key("scenario")) {
                guard let scenario = try? filter.decode(String.self, forKey: Key("scenario")) else {
                    throw APIError.badJSON("\"filter.scenario\" must be a string")
                }
                request.scenario = scenario
            }
            if filter.contains(Key("tags")), try !filter.decodeNil(forKey: Key("tags")) {
                guard let tags = try? filter.decode([String].self, forKey: Key("tags")) else {
                    throw APIError.badJSON("\"filter.tags\" must be an array of strings")
                }
                request.tags = tags
            }
        }
        // `null` is refused here (unlike the other fields, where it means the default): read as
        // "every channel", an unset template variable would widen the search.
        if c.contains(Key("channels")) {
            guard let names = try? c.decode([String].self, forKey: Key("channels")), (1...16).contains(names.count),
                  Set(names).count == names.count else {
                throw APIError(400, "bad_channels", "\"channels\" must be an array of 1 to 16 distinct channel names")
            }
            channels = names
        }
        self.request = request
    }

    /// Parses and validates a body (after its size was checked).
    public static func parse(_ bytes: some Collection<UInt8>) throws(APIError) -> SearchRequest {
        try parseBody(bytes).request
    }

    /// Parses and validates a body, with its `channels`.
    public static func parseBody(_ bytes: some Collection<UInt8>) throws(APIError) -> SearchBody {
        switch CanonicalJSON.checkKeys(bytes) {
        case .unique: break
        case .repeated: throw APIError.repeatedKey
        // Foundation would read a byte-order mark or UTF-16 past the check for repeated keys.
        case .unreadable: throw APIError.badJSON()
        }
        let body: SearchBody
        do {
            body = try JSONDecoder().decode(SearchBody.self, from: Data(bytes))
        } catch let error as APIError {
            throw error
        } catch {
            throw APIError.badJSON()
        }
        let request = body.request
        if !request.query.unicodeScalars.contains(where: Self.isVisible) {
            throw APIError(400, "empty_query", "\"query\" is empty or only whitespace and invisible characters")
        }
        if request.query.utf8.count > maximumQueryBytes {
            throw APIError(413, "query_too_long", "\"query\" is longer than \(maximumQueryBytes) bytes")
        }
        return body
    }

    /// Whether `scalar` shows: not white space, a control character (NUL) or a format
    /// character (a zero-width space or joiner, a byte-order mark), which a query made only of
    /// would be searched as an empty string.
    public static func isVisible(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .spaceSeparator, .lineSeparator, .paragraphSeparator: false
        default: !scalar.properties.isWhitespace
        }
    }

    private static func refuseUnknown(_ keys: [Key], allowed: Set<String>, in place: String) throws {
        // The unknown key itself is not echoed: it is client text like the query.
        if keys.contains(where: { !allowed.contains($0.stringValue) }) {
            throw APIError(400, "unknown_field",
                           "\(place) has an unknown field; allowed: \(allowed.sorted().joined(separator: ", "))")
        }
    }
}
