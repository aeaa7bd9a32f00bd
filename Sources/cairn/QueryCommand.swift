import ArgumentParser
import CairnClient
import CairnCommandLine
import CairnCore
import CairnIndex
import CairnSearch
import Foundation

struct QueryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query", abstract: "Search the installed knowledge base (hybrid BM25 + dense by default).",
        // The socket route, the MCP tool and the Python client all say search.
        aliases: ["search"])

    @OptionGroup var connection: ConnectionOptions
    @ParentCommand var root: CairnCommand

    /// Words given unquoted (`cairn query boil water`) are one query, joined by spaces, as a
    /// search box takes them.
    @Argument(help: "The question or keywords (quoted or not).")
    var words: [String] = []

    var text: String { words.joined(separator: " ") }
    @Option(name: .short, help: "Results wanted (1-100).")
    var k = 3
    @Option(help: "hybrid, lexical, dense or rrf.")
    var mode = "hybrid"
    @Option(help: "Only chunks of this scenario (plus general ones).")
    var scenario: String?
    @Option(name: .customLong("tag"), help: "Only chunks with this tag. Repeatable.")
    var tags: [String] = []
    @Option(name: .customLong("channel"), help: "Only this channel (of a cairnd that follows several). Repeatable.")
    var channels: [String] = []
    @Flag(help: "Print the daemon's JSON answer.")
    var json = false

    func validate() throws {
        guard !words.isEmpty else { throw ValidationError("Missing expected argument '<words>' (the question or keywords)") }
        for channel in channels { try requireText(channel, "--channel") }
        guard (1...100).contains(k) else { throw ValidationError("-k must be between 1 and 100") }
        guard SearchRequest.Mode(rawValue: mode) != nil else {
            throw ValidationError("--mode must be hybrid, lexical, dense or rrf")
        }
    }

    func run() async throws {
        var filter: [String: Any] = [:]
        if let scenario { filter["scenario"] = scenario }
        if !tags.isEmpty { filter["tags"] = tags }
        var request: [String: Any] = ["query": text, "k": k, "mode": mode]
        if !filter.isEmpty { request["filter"] = filter }
        if !channels.isEmpty { request["channels"] = channels }
        let body = try JSONSerialization.data(withJSONObject: request)
        let daemon = DaemonConnection(root: root.connection, local: connection, json: json)
        let answer = try daemon.call("POST", "/v1/search", body: Array(body))
        if json { return try daemon.printJSON(answer) }
        let decoded = try daemon.decode(SearchAnswer.self, from: answer)
        print(Self.render(decoded))
    }

    static func render(_ answer: SearchAnswer) -> String {
        var lines: [String] = []
        if answer.results.isEmpty { lines.append("No matching chunks.") }
        for result in answer.results {
            var scores = [String(format: "score %.3f", result.fusedScore)]
            if let lexical = result.lexicalScore { scores.append(String(format: "bm25 %.2f", lexical)) }
            if let dense = result.denseScore { scores.append(String(format: "cos %.3f", dense)) }
            let origin = answer.channels == nil ? "" : "  (\(result.channel ?? "?") v\(result.version ?? 0))"
            lines.append("\(result.rank). \(result.chunk.title)  [\(scores.joined(separator: ", "))]  id \(result.chunk.id)\(origin)")
            lines.append("   " + snippet(result.chunk.content))
        }
        lines.append("")
        if let unmatched = answer.unmatchedFilter { lines.append("note: " + unmatched.sentence) }
        if let channels = answer.channels {
            lines.append("channels " + channels.map {
                "\($0.channel) v\($0.version)" + ($0.stale == true ? " (STALE)" : "") + ($0.denseAvailable == false ? " (lexical only)" : "")
            }
                .joined(separator: ", ") + (answer.online == false ? " · offline" : ""))
        } else {
            lines.append(footer(version: answer.version, stateRoot: answer.stateRoot, online: answer.online,
                                stale: answer.stale, denseAvailable: answer.denseAvailable))
        }
        return lines.joined(separator: "\n")
    }

    static func snippet(_ text: String, limit: Int = 100) -> String {
        let flat = text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        return flat.count <= limit ? flat : String(flat.prefix(limit - 1)) + "…"
    }

    static func footer(version: Int, stateRoot: String, online: Bool?, stale: Bool?, denseAvailable: Bool) -> String {
        var parts = ["version \(version) (state root \(stateRoot.prefix(12))…)"]
        parts.append(online.map { $0 ? "online" : "offline" } ?? "online: unknown")
        if stale == true { parts.append("STALE: the installed version is out of date") }
        if !denseAvailable { parts.append("lexical only: no embedding model installed") }
        return parts.joined(separator: " · ")
    }
}

/// `--tag` and `--channel` take one value each time and may be given again; any other option
/// given twice is refused (`mainWithOneLineUsage`).
extension QueryCommand: RepeatableOptions {
    static let repeatableOptions: Set<String> = ["--tag", "--channel"]
}
