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

    /// SHA-256 of the canonical JSON of title, scenario, tags and source (`metadataJSON`).
    public var metadataHash: ContentID {
        var bytes: [UInt8] = []
        Self.writeMetadataJSON(title: title.utf8, scenario: scenario?.utf8, tags: tags, source: source?.utf8, to: &bytes)
        return ContentID(hashing: bytes)
    }

    /// Appends the bytes of `metadataJSON` for these fields, given as UTF-8 (a chunk's, or a
    /// stored row's text read unchanged), without building the JSON value: the keys in their
    /// canonical order (`scenario`, `source`, `tags`, `title`).
    public static func writeMetadataJSON<U: Collection<UInt8>>(title: U, scenario: U?, tags: [String], source: U?,
                                                                to out: inout [UInt8]) {
        out.append(contentsOf: #"{"scenario":"#.utf8)
        if let scenario { CanonicalJSON.writeString(utf8: scenario, to: &out) } else { out.append(contentsOf: "null".utf8) }
        out.append(contentsOf: #","source":"#.utf8)
        if let source { CanonicalJSON.writeString(utf8: source, to: &out) } else { out.append(contentsOf: "null".utf8) }
        out.append(contentsOf: #","tags":["#.utf8)
        for (index, tag) in tags.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            CanonicalJSON.writeString(utf8: tag.utf8, to: &out)
        }
        out.append(contentsOf: #"],"title":"#.utf8)
        CanonicalJSON.writeString(utf8: title, to: &out)
        out.append(UInt8(ascii: "}"))
    }

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
