import CairnClient
import CairnIndex
import CairnSearch
import Foundation

/// The tools `cairn mcp` offers, each a call to cairnd's socket API (protocol/socket-api.md).
/// A daemon error becomes a tool error (`isError`) carrying its code and message; an unreachable
/// daemon too, after at most the client's timeout.
struct MCPTools {
    let socketPath: String
    var timeout: Double = 30
    /// Said beside "cannot reach": the config file whose socket was not used (`DaemonConnection.note`).
    var note: String?

    static let names = Set(definitions.compactMap { $0["name"] as? String })

    static var definitions: [[String: Any]] { [
        [
            "name": "search",
            "title": "Search the offline knowledge base",
            "description": """
                Search the device's offline knowledge base (field manuals, emergency and safety \
                guidance) and return the most relevant passages, most relevant first, numbered [1], \
                [2]… with their ids and sources, plus how fresh the knowledge is. Use it before \
                answering any practical question this knowledge base may cover, and cite the \
                passages you use by id (numbers start again at each search). A passage over 2,000 \
                characters is cut; `get` gives it whole. Works without a network.
                """,
            "inputSchema": [
                "type": "object",
                "properties": [
                    "query": ["type": "string", "minLength": 1, "maxLength": SearchBody.maximumQueryBytes,
                              "description": "The question or keywords, in the user's words (at most 4,096 UTF-8 bytes)."],
                    "k": ["type": "integer", "minimum": 1, "maximum": 20, "default": 5, "description": "Passages to return."],
                    "mode": ["type": "string", "enum": SearchRequest.Mode.allCases.map(\.rawValue), "default": "hybrid",
                             "description": "hybrid (default) combines keywords and meaning; lexical: the words only; dense: the meaning only; rrf: hybrid by reciprocal rank fusion."],
                    "scenario": ["type": "string", "description": "Only passages for this scenario (e.g. flood; exact, case included), plus general ones. One no passage has is said in a note naming those there are."],
                    "tags": ["type": "array", "items": ["type": "string"], "description": "Only passages carrying all these tags (exact, case included)."],
                    "channel": ["type": "string", "minLength": 1, "description": "Only this knowledge base, when the device holds several (status lists them)."],
                ] as [String: Any],
                "required": ["query"],
                "additionalProperties": false,
            ] as [String: Any],
            "outputSchema": [
                "type": "object",
                "description": "The passages, each cut at 2,000 characters as the text cuts it (`get` gives one whole), and how fresh the knowledge is.",
                "properties": [
                    "results": ["type": "array", "items": [
                        "type": "object",
                        "properties": Self.passageProperties.merging([
                            "rank": ["type": "integer", "minimum": 1], "score": ["type": ["number", "null"]],
                            "cut": ["type": "boolean", "description": "The passage is longer than 2,000 characters and `content` holds its first 2,000: `get` with its id gives it whole."],
                            "characters": ["type": "integer", "minimum": 0, "description": "The whole passage's length in characters, when cut."],
                        ] as [String: Any]) { $1 },
                        "required": ["rank", "id", "title", "content"],
                    ] as [String: Any]],
                    "version": ["type": ["integer", "null"]], "state_root": ["type": ["string", "null"]],
                    "mode": ["type": ["string", "null"]], "online": ["type": ["boolean", "null"]],
                    "stale": ["type": ["boolean", "null"]], "expired": ["type": ["boolean", "null"]],
                    "expires": ["type": ["string", "null"]], "channel": ["type": ["string", "null"]],
                    "freshness": ["type": "string", "description": "One line per channel: version, when published, online or not, stale, expired."],
                    "channels": ["type": "array", "items": ["type": "object"], "description": "Each channel that answered, when several were searched."],
                    "unmatched_filter": ["type": "object", "description": "Filter values no passage has (scenario, tags)."],
                ] as [String: Any],
                "required": ["results", "freshness"],
            ] as [String: Any],
        ],
        [
            "name": "get",
            "title": "Read one passage",
            "description": "Return one passage of the offline knowledge base in full, by the id a search result gave.",
            "inputSchema": [
                "type": "object",
                "properties": [
                    "id": ["type": "string", "description": "The passage id from a search result."],
                    "channel": ["type": "string", "minLength": 1, "description": "The search result's channel, when the device holds several knowledge bases (ids may repeat across them)."],
                    "version": ["type": "integer", "minimum": 1, "description": "The search result's version: the passage is then the one that search found, or the call fails with version_changed if the knowledge base was updated since (search again)."],
                ] as [String: Any],
                "required": ["id"],
                "additionalProperties": false,
            ] as [String: Any],
            "outputSchema": [
                "type": "object",
                "description": "The passage whole, with the version and channel it came from.",
                "properties": Self.passageProperties.merging([
                    "state_root": ["type": "string"],
                ] as [String: Any]) { $1 },
                "required": ["id", "title", "content", "version"],
            ] as [String: Any],
        ],
        [
            "name": "status",
            "title": "Knowledge base status",
            "description": "Which version of the offline knowledge base is installed, how fresh it is (online, stale, expired, last update) and whom it trusts. Use it when the user asks how current the information is.",
            "inputSchema": ["type": "object", "properties": [String: Any](), "additionalProperties": false] as [String: Any],
            "outputSchema": [
                "type": "object",
                "description": "cairnd's GET /v1/status answer (protocol/socket-api.md).",
                "properties": [
                    "installed": ["type": "boolean"], "version": ["type": ["integer", "null"]],
                    "channel": ["type": ["string", "null"]], "published": ["type": ["string", "null"]],
                    "expired": ["type": ["boolean", "null"]], "not_serving": ["type": ["string", "null"]],
                    "sync": ["type": "object"], "channels": ["type": "array", "items": ["type": "object"]],
                ] as [String: Any],
                "required": ["installed", "sync"],
            ] as [String: Any],
        ],
    ].map { tool in
        // Each only reads the device's knowledge base: hosts need not ask before a call.
        var tool = tool
        tool["annotations"] = ["readOnlyHint": true, "idempotentHint": true, "openWorldHint": false]
        return tool
    } }

    /// A passage's fields in `search` results and `get`'s answer (`outputSchema`).
    static var passageProperties: [String: Any] { [
        "id": ["type": "string"], "title": ["type": "string"], "content": ["type": "string"],
        "scenario": ["type": ["string", "null"]], "tags": ["type": "array", "items": ["type": "string"]],
        "source": ["type": ["string", "null"]], "channel": ["type": ["string", "null"]],
        "version": ["type": ["integer", "null"], "description": "The version it came from: pass it to get to read this passage as found."],
    ] }

    /// The `tools/call` result for `name`.
    func call(_ name: String, arguments: [String: Any]) -> [String: Any] {
        do {
            try Self.checkNames(of: arguments, tool: name)
            switch name {
            case "search": return try search(arguments)
            case "get": return try get(arguments)
            default: return try status()
            }
        } catch let failure as ToolFailure {
            // No structuredContent: the tool's outputSchema describes its answer, and a client
            // may check any structuredContent against it, an error's too (the TypeScript SDK's
            // 1.x did), and then hand the agent a schema failure instead of this one.
            return ["content": [["type": "text", "text": "\(failure.code): \(failure.message)"]], "isError": true]
        } catch {
            return ["content": [["type": "text", "text": "internal: \(error)"]], "isError": true]
        }
    }

    struct ToolFailure: Error {
        let code: String
        let message: String
    }

    // MARK: Tools

    /// Refuses an argument the tool's `inputSchema` does not name (a model that writes `top_k`
    /// for `k` must hear so, not get the default silently).
    static func checkNames(of arguments: [String: Any], tool: String) throws {
        let schema = definitions.first { $0["name"] as? String == tool }?["inputSchema"] as? [String: Any]
        let known = Set((schema?["properties"] as? [String: Any] ?? [:]).keys)
        if let unknown = arguments.keys.sorted().first(where: { !known.contains($0) }) {
            let expected = known.isEmpty ? "it takes none" : "it takes " + known.sorted().joined(separator: ", ")
            throw ToolFailure(code: "bad_arguments", message: "`\(tool)` has no argument `\(unknown)`; \(expected)")
        }
    }

    /// The `search` request to cairnd from the tool's arguments, each checked against the
    /// `inputSchema` (a wrong type or a value out of range is `bad_arguments`, never dropped).
    static func searchRequest(_ arguments: [String: Any]) throws -> [String: Any] {
        func bad(_ message: String) -> ToolFailure { ToolFailure(code: "bad_arguments", message: message) }
        guard let query = arguments["query"] as? String, query.unicodeScalars.contains(where: SearchBody.isVisible) else {
            throw bad("`query` must be a non-empty string")
        }
        guard query.utf8.count <= SearchBody.maximumQueryBytes else {
            throw bad("`query` is longer than \(SearchBody.maximumQueryBytes) UTF-8 bytes; shorten it")
        }
        // An explicit null is the argument left out, as cairnd reads it (models and strict
        // schemas send one for every optional field). Not for `channel`: null must not widen a
        // search to every channel.
        let arguments = arguments.filter { ["k", "mode", "scenario", "tags"].contains($0.key) ? !($0.value is NSNull) : true }
        var k = 5
        if let value = arguments["k"] {
            guard let integer = MCPServer.integer(value), (1...20).contains(integer) else { throw bad("`k` must be an integer from 1 to 20") }
            k = integer
        }
        var mode = "hybrid"
        if let value = arguments["mode"] {
            let modes = SearchRequest.Mode.allCases.map(\.rawValue)
            guard let text = value as? String, modes.contains(text) else { throw bad("`mode` must be one of \(modes.joined(separator: ", "))") }
            mode = text
        }
        var request: [String: Any] = ["query": query, "k": k, "mode": mode]
        var filter: [String: Any] = [:]
        if let value = arguments["scenario"] {
            guard let scenario = value as? String else { throw bad("`scenario` must be a string") }
            filter["scenario"] = scenario
        }
        if let value = arguments["tags"] {
            guard let tags = value as? [Any], tags.allSatisfy({ $0 is String }) else { throw bad("`tags` must be an array of strings") }
            if !tags.isEmpty { filter["tags"] = tags }
        }
        if !filter.isEmpty { request["filter"] = filter }
        if let value = arguments["channel"] {
            guard let channel = value as? String, !channel.isEmpty else { throw bad("`channel` must be a non-empty string") }
            request["channels"] = [channel]
        }
        return request
    }

    func search(_ arguments: [String: Any]) throws -> [String: Any] {
        let request = try Self.searchRequest(arguments)
        let started = ContinuousClock.now
        let answer = try object(try send("POST", "/v1/search", body: JSONSerialization.data(withJSONObject: request)))
        // The status for the freshness line gets what is left of the timeout: the whole call
        // fails within it, as docs/mcp.md says (without it, the answer's own flags speak).
        let left = timeout - (ContinuousClock.now - started) / .seconds(1)
        let status = left > 0.05 ? (try? object(try send("GET", "/v1/status", timeout: left))) ?? [:] : [:]
        // One freshness line for each channel the answer came from: the channel named, or, when
        // several answered, each of them (status keeps the further channels' in `channels`).
        var freshnessLines: [String]
        if let channels = answer["channels"] as? [[String: Any]] {
            freshnessLines = channels.map { entry in
                Self.freshness(version: entry["version"], status: Self.status(status, of: entry["channel"] as? String), answer: entry)
            }
        } else {
            let named = arguments["channel"] as? String
            freshnessLines = [Self.freshness(version: answer["version"], status: Self.status(status, of: named), answer: answer)]
        }
        if freshnessLines.isEmpty { freshnessLines = [Self.freshness(version: nil, status: status, answer: answer)] }
        let results = (answer["results"] as? [[String: Any]] ?? []).map { result -> [String: Any] in
            let chunk = result["chunk"] as? [String: Any] ?? [:]
            let content = chunk["content"] as? String ?? ""
            var entry: [String: Any] = [
                "rank": result["rank"] ?? NSNull(), "id": chunk["id"] ?? NSNull(), "title": chunk["title"] ?? "",
                "content": content, "scenario": chunk["scenario"] ?? NSNull(),
                "tags": chunk["tags"] ?? [], "source": chunk["source"] ?? NSNull(),
                "score": result["fused_score"] ?? result["dense_score"] ?? result["lexical_score"] ?? NSNull(),
                "channel": result["channel"] ?? NSNull(), "version": result["version"] ?? NSNull()]
            if let cut = Self.cut(content) {
                (entry["content"], entry["cut"], entry["characters"]) = (cut, true, content.unicodeScalars.count)
            }
            return entry
        }
        let freshness = freshnessLines.joined(separator: "\n")
        var lines = freshnessLines
        // A filter value no passage has narrows the search silently: said, with what there is.
        let unmatched = (answer["unmatched_filter"] as? [String: Any]).flatMap { try? JSONSerialization.data(withJSONObject: $0) }
            .flatMap { try? JSONDecoder().decode(SearchResponse.UnmatchedFilter.self, from: $0) }
        if let unmatched { lines.append("Note: " + unmatched.sentence + ".") }
        if results.isEmpty { lines.append("No passage matches this query.") }
        // With several channels a result's id is read back with its channel (`get`'s argument).
        let several = answer["channels"] != nil
        for result in results {
            let channel = several ? (result["channel"] as? String).map { ", channel: \($0)" } ?? "" : ""
            // What a citation needs beside the id: where the passage came from.
            let source = (result["source"] as? String).map { ", source: \($0)" } ?? ""
            let cut = result["cut"] as? Bool == true ? "… (cut; `get` with this id gives the whole passage)" : ""
            lines.append("[\(result["rank"] as? Int ?? 0)] \(result["title"] as? String ?? "") — "
                         + "\(result["content"] as? String ?? "")\(cut) (id: \(result["id"] as? String ?? "")\(source)\(channel))")
        }
        var structured: [String: Any] = [
            "results": results, "version": answer["version"] ?? NSNull(), "state_root": answer["state_root"] ?? NSNull(),
            "mode": answer["mode"] ?? NSNull(), "online": answer["online"] ?? NSNull(), "stale": answer["stale"] ?? NSNull(),
            "expired": answer["expired"] ?? NSNull(), "expires": answer["expires"] ?? NSNull(),
            "channel": (answer["channels"] == nil ? arguments["channel"] as? String : nil) ?? status["channel"] ?? NSNull(),
            "freshness": freshness,
        ]
        if let channels = answer["channels"] { structured["channels"] = channels }
        if let filter = answer["unmatched_filter"] { structured["unmatched_filter"] = filter }
        return ["content": [["type": "text", "text": lines.joined(separator: "\n")]], "structuredContent": structured, "isError": false]
    }

    /// The most characters of one passage a search carries, in its text and its
    /// `structuredContent` alike: a whole record (a JSON source's, kept unsplit) would fill an
    /// agent's context whichever of the two its host hands the model. `get` gives it whole.
    static let passageCharacters = 2_000

    /// The first `passageCharacters` of `content`, or nil when it is no longer. Characters are
    /// Unicode scalars (code points), as JSON Schema's `maxLength` and Python's `len` count
    /// them: a grapheme cluster may hold any number of them (combining marks), which a cut by
    /// clusters would never bound.
    static func cut(_ content: String) -> String? {
        let scalars = content.unicodeScalars
        guard let end = scalars.index(scalars.startIndex, offsetBy: passageCharacters, limitedBy: scalars.endIndex),
              end != scalars.endIndex else { return nil }
        return String(scalars[..<end])
    }

    func get(_ arguments: [String: Any]) throws -> [String: Any] {
        guard let id = arguments["id"] as? String, !id.isEmpty else {
            throw ToolFailure(code: "bad_arguments", message: "`id` must be a non-empty string")
        }
        let channel = arguments["channel"]
        guard channel == nil || (channel as? String).map({ !$0.isEmpty }) == true else {
            throw ToolFailure(code: "bad_arguments", message: "`channel` must be a non-empty string")
        }
        var version: Int?
        if let value = arguments["version"], !(value is NSNull) {
            guard let number = MCPServer.integer(value), number >= 1 else {
                throw ToolFailure(code: "bad_arguments", message: "`version` must be a version number (a search result's `version`)")
            }
            version = number
        }
        let chunk = try object(try send("GET", ChunkAnswer.path(for: id, channel: channel as? String, version: version)))
        // A cairnd from before 2026-12-06 ignores ?version= and answers from the one it serves.
        if let version, chunk["version"] as? Int != version {
            guard let serving = chunk["version"] as? Int else {
                throw ToolFailure(code: "bad_answer", message: "cairnd's answer names no version, so it cannot be held to version \(version)")
            }
            throw ToolFailure(code: "version_changed", message: ChunkAnswer.versionChanged(pinned: version, serving: serving))
        }
        // The source and channel in the text: most hosts give a model the text alone, and the
        // instructions ask it to cite the source.
        let named = [("source", chunk["source"]), ("channel", chunk["channel"])].compactMap { name, value in
            (value as? String).flatMap { $0.isEmpty ? nil : "\(name): \($0)" }
        }
        let text = "\(chunk["title"] as? String ?? "") (id: \(([id] + named).joined(separator: ", ")), version \(chunk["version"] as? Int ?? 0))\n\n"
            + "\(chunk["content"] as? String ?? "")"
        return ["content": [["type": "text", "text": text]], "structuredContent": chunk, "isError": false]
    }

    func status() throws -> [String: Any] {
        let status = try object(try send("GET", "/v1/status"))
        // Status keeps online and stale in `sync`, expired at the top level.
        var flags = status["sync"] as? [String: Any] ?? [:]
        flags["expired"] = status["expired"]
        flags["expires"] = status["expires"]
        var lines = [Self.freshness(version: status["version"], status: status, answer: flags)]
        // What a model must not miss: why nothing answers, and a sync that failed.
        if let reason = status["not_serving"] as? String { lines.append("Not answering: \(reason).") }
        if let error = (status["sync"] as? [String: Any])?["last_error"] as? String { lines.append("Last sync failed: \(error)") }
        // Each further channel on a line of its own, as `channel` arguments name them.
        let own = status["channel"] as? String
        for entry in status["channels"] as? [[String: Any]] ?? [] {
            guard let name = entry["channel"] as? String, name != own else { continue }
            var line = entry["version"] is Int ? Self.freshness(version: entry["version"], status: ["channel": name, "sync": entry], answer: entry)
                : "Channel \(name): no version installed yet."
            if let error = entry["last_error"] as? String { line += " Last sync failed: \(error)" }
            lines.append(line)
        }
        return ["content": [["type": "text", "text": lines.joined(separator: "\n")]], "structuredContent": status, "isError": false]
    }

    /// The status as seen from one channel: the daemon's own (`name` nil or its own), or a further
    /// one's entry of `channels` standing in for `sync`.
    static func status(_ status: [String: Any], of name: String?) -> [String: Any] {
        guard let name, name != status["channel"] as? String,
              let entry = (status["channels"] as? [[String: Any]])?.first(where: { $0["channel"] as? String == name })
        else { return status }
        return ["channel": name, "sync": entry]
    }

    /// One line: the version, and how fresh it is (online or offline since the last success,
    /// stale, expired).
    static func freshness(version: Any?, status: [String: Any], answer: [String: Any]) -> String {
        guard let version = version as? Int else { return "No knowledge base is installed yet." }
        let sync = status["sync"] as? [String: Any] ?? [:]
        let lastSuccess = sync["last_success"] as? String
        var parts = ["Knowledge base version \(version)" + ((status["channel"] as? String).map { " (channel \($0))" } ?? "")
                     + (((status["published"] ?? sync["published"]) as? String).map { ", published \($0)" } ?? "")]
        switch answer["online"] as? Bool {
        case true?: parts.append("online, checked for updates" + ((sync["last_attempt"] as? String).map { " at \($0)" } ?? ""))
        case false?: parts.append("offline" + (lastSuccess.map { "; last update \($0)" } ?? ""))
        default: break
        }
        if answer["stale"] as? Bool == true { parts.append("STALE: a newer version may exist") }
        if answer["expired"] as? Bool == true {
            parts.append("EXPIRED" + ((answer["expires"] as? String).map { " at \($0)" } ?? "") + ": no newer version has been installed on this device")
        }
        return parts.joined(separator: "; ") + "."
    }

    // MARK: Transport

    func send(_ method: String, _ path: String, body: Data? = nil, timeout: Double? = nil) throws -> [UInt8] {
        let response: UnixHTTPClient.Response
        do {
            response = try UnixHTTPClient(socketPath: socketPath, timeout: timeout ?? self.timeout).send(method: method, path: path,
                                                                                        body: body.map(Array.init))
        } catch where error.code == .unreachable {
            // What to do by the reason, as the command line says it: "start cairnd" is the wrong
            // advice to a host whose user may not use the socket.
            throw ToolFailure(code: "unavailable", message: "\(error.message); \(DaemonConnection.remedy(for: error.cause))"
                                + (note.map { " (\($0))" } ?? ""))
        } catch {
            throw ToolFailure(code: "unavailable", message: error.message)
        }
        guard (200..<300).contains(response.status) else {
            let problem = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
            throw ToolFailure(code: problem?["code"] as? String ?? "http_\(response.status)",
                              message: problem?["message"] as? String ?? "cairnd answered \(response.status)")
        }
        return response.body
    }

    func object(_ body: [UInt8]) throws -> [String: Any] {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            throw ToolFailure(code: "bad_answer", message: "cairnd's answer is not a JSON object")
        }
        return object
    }
}
