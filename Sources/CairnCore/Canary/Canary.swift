/// A query the device runs after installing a version, with the chunk ids it must find in the
/// top `k` (protocol/manifest.md, "canaries").
public struct Canary: Sendable, Equatable {
    /// The retrieval modes a canary may name.
    public static let modes = ["hybrid", "lexical", "dense", "rrf"]
    /// `k` when a canaries file leaves it out.
    public static let defaultK = 5
    /// The largest `k` a canary may ask for.
    public static let maxK = 1_000

    public var query: String
    /// Chunk ids that must all appear in the top `k`.
    public var expect: [String]
    public var k: Int
    /// One of `modes`; `hybrid` unless a canaries file says otherwise.
    public var mode: String

    public init(query: String, expect: [String], k: Int = Canary.defaultK, mode: String = "hybrid") {
        self.query = query
        self.expect = expect
        self.k = k
        self.mode = mode
    }

    /// Parses a publisher's canaries file: a JSON array of `{"query", "expect", "k"?, "mode"?}`
    /// (`k` defaults to 5, `mode` to `hybrid`). Unknown fields are refused.
    /// - Throws: `CoreError` with code `.canaryMalformed` (or `.jsonMalformed`), naming the field.
    public static func parseFile(_ bytes: [UInt8]) throws(CoreError) -> [Canary] {
        guard case .array(let items) = try CanonicalJSON.parse(bytes) else {
            throw CoreError(.canaryMalformed, "a canaries file must be a JSON array")
        }
        var canaries: [Canary] = []
        for (index, item) in items.enumerated() {
            var reader = try JSONObjectReader(item, path: "[\(index)]", code: .canaryMalformed)
            let query = try reader.string("query")
            let expect = try reader.strings("expect")
            let k = reader.optional("k") == nil ? defaultK : try reader.integer("k", in: 1...maxK)
            let mode = reader.optional("mode") == nil ? "hybrid" : try reader.string("mode", oneOf: modes)
            try reader.finish()
            canaries.append(Canary(query: query, expect: expect, k: k, mode: mode))
        }
        return canaries
    }

    /// The canary as it appears in a manifest: every field explicit.
    public var canonicalJSON: CanonicalJSON {
        .object(["query": .string(query), "expect": .array(expect.map(CanonicalJSON.string)),
                 "k": .integer(Int64(k)), "mode": .string(mode)])
    }

    /// Reads a canary from a manifest, where every field is required.
    static func read(_ reader: inout JSONObjectReader) throws(CoreError) -> Canary {
        Canary(query: try reader.string("query"), expect: try reader.strings("expect"),
               k: try reader.integer("k", in: 1...maxK), mode: try reader.string("mode", oneOf: modes))
    }
}
