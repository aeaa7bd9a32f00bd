/// One retrievable unit of a knowledge base: what a query returns.
public struct Chunk: Hashable, Sendable, Codable {
    /// Stable identifier, unique within a version.
    public var id: String
    public var title: String
    public var content: String
    /// The scenario the chunk belongs to (e.g. "flood"); "general" qualifies for every filter.
    public var scenario: String?
    public var tags: [String]
    /// Where the text came from (a file path, a URL, a publication).
    public var source: String?

    public init(id: String, title: String, content: String, scenario: String? = nil, tags: [String] = [], source: String? = nil) {
        self.id = id
        self.title = title
        self.content = content
        self.scenario = scenario
        self.tags = tags
        self.source = source
    }

    /// SHA-256 of the content's UTF-8 bytes. Together with the model id, the key of the
    /// embedding cache (the embedded text is title and content; see `embeddingText`).
    public var contentHash: ContentID { ContentID(hashing: Array(content.utf8)) }

    /// SHA-256 of the canonical JSON of title, scenario, tags and source.
    public var metadataHash: ContentID { ContentID(hashing: metadataJSON.bytes) }

    public var metadataJSON: CanonicalJSON {
        .object([
            "title": .string(title),
            "scenario": scenario.map(CanonicalJSON.string) ?? .null,
            "tags": .array(tags.map(CanonicalJSON.string)),
            "source": source.map(CanonicalJSON.string) ?? .null,
        ])
    }

    /// The text the publisher embeds for this chunk: the title, a blank line, the content.
    public var embeddingText: String { title.isEmpty ? content : title + "\n\n" + content }
}
