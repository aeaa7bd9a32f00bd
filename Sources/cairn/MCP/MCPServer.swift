import CairnCore
import CairnCommandLine
import Foundation

/// The Model Context Protocol over stdio (JSON-RPC 2.0, one message per line; revisions
/// 2024-11-05 … 2025-11-25 of the `initialize` handshake): what `cairn mcp` speaks to an agent.
/// Requests run at once (up to `concurrentRequests`), each answered when it is ready; the
/// tools are `MCPTools`.
struct MCPServer {
    /// The handshake revisions this server speaks, oldest first; the newest is offered when the
    /// client asks for one it does not know.
    static let protocolVersions = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
    static let instructions = """
        Offline knowledge base of a Cairn device (field manuals, emergency guidance). Use `search` \
        before answering a practical question from this domain and cite passages by their id \
        (and source; the [n] numbers start again at each search); \
        `get` returns one passage in full by id (with the result's channel when it names one); \
        `status` says which version is installed and how fresh it is.
        """

    let tools: MCPTools

    /// The longest line read (4 MiB): a tool call is a few kilobytes.
    static let maximumLineBytes = 4 << 20

    /// What `LineReader` read.
    enum Line: Equatable {
        /// A line, its newline stripped.
        case text(String)
        /// One over the limit, skipped to its end without being held.
        case overlong
        /// One that is not UTF-8 (which MCP's stdio messages must be): decoded with U+FFFD, a
        /// string id would come back changed and its client wait for ever.
        case notUTF8
    }

    /// Lines of at most `limit` bytes from `input`.
    struct LineReader {
        let input: FileHandle
        let limit: Int
        private var pending: [UInt8] = []
        /// How many of `pending`'s bytes are known to hold no newline: each read is searched
        /// once (searched from the start at every read, a 4 MiB line took 47 s of CPU).
        private var searched = 0
        private var overlong = false
        private var ended = false

        init(input: FileHandle, limit: Int) {
            self.input = input
            self.limit = limit
        }

        /// The next line; nil at the end of the input.
        mutating func next() -> Line? {
            while true {
                if let newline = pending[searched...].firstIndex(of: 0x0A) {
                    // CRLF too, as readLine took it.
                    let end = newline > 0 && pending[newline - 1] == 0x0D ? newline - 1 : newline
                    // One that came whole in the last read is over the limit all the same.
                    let line = Self.line(pending[..<end], overlong: overlong || end > limit)
                    pending.removeSubrange(...newline)
                    (searched, overlong) = (0, false)
                    return line
                }
                searched = pending.count
                // (A CR last may be a CRLF's, whose LF the next read brings: not the line's.)
                if pending.count - (pending.last == 0x0D ? 1 : 0) > limit {
                    // Too long already: its bytes go; the rest up to its newline too.
                    overlong = true
                    pending.removeAll(keepingCapacity: true)
                    searched = 0
                }
                if ended {
                    guard !pending.isEmpty || overlong else { return nil }
                    defer { (pending, searched, overlong) = ([], 0, false) }
                    return Self.line(pending[...], overlong: overlong)
                }
                let data = input.availableData
                if data.isEmpty { ended = true } else { pending += data }
            }
        }

        private static func line(_ bytes: ArraySlice<UInt8>, overlong: Bool) -> Line {
            if overlong { return .overlong }
            return String(validating: bytes, as: UTF8.self).map(Line.text) ?? .notUTF8
        }
    }

    /// Tool calls that run at once: an agent's parallel calls do not wait for each other. The
    /// rest (`ping`, `initialize`, `tools/list`, cancellations) is answered as it is read, never
    /// behind a tool call that waits on a slow cairnd.
    static let concurrentRequests = 4

    /// Tool calls waiting for one of the `concurrentRequests`; past it a call is refused at once
    /// (−32000), not held in memory without end.
    static let waitingCalls = 1024

    /// Reads messages from standard input until it ends, writing each answer as one line to
    /// `output` (whole lines, under a lock) as it is ready; then waits for the calls in flight.
    /// `notifications/cancelled` drops the answer of a call still running, and a call still
    /// waiting does not run.
    func run(output: FileHandle = .standardOutput) {
        let writing = NSLock()
        let requests = InFlight()
        let calls = OperationQueue()
        calls.maxConcurrentOperationCount = Self.concurrentRequests
        let write = { @Sendable (answer: Any) in
            let line = Self.encode(answer) + Data("\n".utf8)
            // A client that cannot take the answer (a full disk under `> file`, a closed
            // descriptor) ends the server in one line, exit 74 (docs/exit-codes.md), where
            // FileHandle.write would trap.
            writing.withLock {
                if let code = writeWhole([UInt8](line), to: output.fileDescriptor) {
                    writeStandardError("cairn mcp: cannot write standard output (\(String(cString: strerror(code)))); stopping\n")
                    exit(74)
                }
            }
        }
        var lines = LineReader(input: .standardInput, limit: Self.maximumLineBytes)
        while let read = lines.next() {
            let line: String
            switch read {
            case .overlong:
                // Its bytes were dropped as they came: a gigabyte line does not fill memory.
                write(Self.error(id: NSNull(), code: -32600, "Invalid Request: a line over \(Self.maximumLineBytes) bytes"))
                continue
            case .notUTF8:
                write(Self.error(id: NSNull(), code: -32700, "Parse error: a line that is not UTF-8"))
                continue
            case .text(let text):
                line = text
            }
            guard !line.trimmingCharacters(in: .whitespaces).isEmpty else { continue }
            // Parsed once, here: the worker answers from the same object.
            // A bare number, string or null is JSON too: an Invalid Request (−32600), not a Parse error.
            let parsed = Parsed(object: try? JSONSerialization.jsonObject(with: Data(line.utf8), options: .fragmentsAllowed))
            let object = parsed.object
            if let id = Self.cancellation(in: object) {
                requests.cancel(id)
                continue
            }
            guard Self.callsATool(object) else {
                if let answer = handle(line: line, parsed: object) { write(answer) }
                continue
            }
            let id = Self.requestID(in: object)
            guard calls.operationCount < Self.waitingCalls + Self.concurrentRequests else {
                // Every request is answered, each of a batch's in one array (a client without a
                // timeout of its own would wait for ever); a notification is dropped.
                let busy = { (raw: Any) in Self.error(id: raw, code: -32000, "Server busy: \(Self.waitingCalls) tool calls wait for cairnd; try again later") }
                if let request = object as? [String: Any], let raw = request["id"] {
                    write(busy(raw))
                } else if let batch = object as? [Any] {
                    let answers = batch.compactMap { ($0 as? [String: Any])?["id"] }.map(busy)
                    if !answers.isEmpty { write(answers) }
                }
                continue
            }
            // An id still in use (MCP: a request id is never reused within a session): the two
            // answers could not be told apart, nor a cancellation be meant for one of them.
            if let id, !requests.start(id) {
                let raw = (object as? [String: Any])?["id"] ?? NSNull()
                write(Self.error(id: raw, code: -32600, "Invalid Request: id \(raw) is in use by a request still running"))
                continue
            }
            calls.addOperation {
                // Cancelled while it waited: cairnd is not asked, and nothing is answered.
                if let id, requests.isCancelled(id) {
                    _ = requests.finish(id)
                    return
                }
                let answer = handle(line: line, parsed: parsed.object)
                let wanted = id.map(requests.finish) ?? true
                guard let answer, wanted else { return }
                write(answer)
            }
        }
        calls.waitUntilAllOperationsAreFinished()
    }

    /// Whether a message (or a batch's member) is a `tools/call`: what waits on cairnd.
    static func callsATool(_ object: Any?) -> Bool {
        if let batch = object as? [Any] { return batch.contains(where: callsATool) }
        return (object as? [String: Any])?["method"] as? String == "tools/call"
    }

    /// A line's decoded JSON handed to the worker that answers it.
    struct Parsed: @unchecked Sendable {
        // @unchecked: Foundation's JSON values, read only once decoded.
        let object: Any?
    }

    /// The requests running, and those of them the client cancelled (their answers are dropped).
    /// A cancellation of a request not running (ended, or never sent) is ignored.
    final class InFlight: @unchecked Sendable {
        // @unchecked: every access holds `lock`.
        private let lock = NSLock()
        private var running: [String: Bool] = [:]
        /// Starts `id`; false, with nothing changed, when a request of that id still runs.
        func start(_ id: String) -> Bool {
            lock.withLock {
                guard running[id] == nil else { return false }
                running[id] = false
                return true
            }
        }
        func cancel(_ id: String) { lock.withLock { if running[id] != nil { running[id] = true } } }
        func isCancelled(_ id: String) -> Bool { lock.withLock { running[id] == true } }
        /// Ends `id`; whether its answer is still wanted.
        func finish(_ id: String) -> Bool { lock.withLock { running.removeValue(forKey: id) != true } }
    }

    /// The request a `notifications/cancelled` message names (its `params.requestId`), as a key.
    static func cancellation(in object: Any?) -> String? {
        guard let message = object as? [String: Any],
              message["method"] as? String == "notifications/cancelled", message["id"] == nil,
              let id = (message["params"] as? [String: Any])?["requestId"] else { return nil }
        return key(id)
    }

    /// A single request's id as a key (nil for batches, notifications, ids of another type).
    static func requestID(in object: Any?) -> String? {
        guard let message = object as? [String: Any], let id = message["id"] else { return nil }
        return key(id)
    }

    static func key(_ id: Any) -> String? {
        if let text = id as? String { return "s:" + text }
        return integer(id).map { "i:\($0)" }
    }

    /// The answer to one line: an object, or for a batch (an array) the array of its members'
    /// answers; nil when nothing is to be answered (notifications and responses only).
    /// `parsed`: the line already decoded by the caller (nil: not JSON).
    func handle(line: String, parsed: Any?) -> Any? {
        guard let object = parsed else {
            return Self.error(id: NSNull(), code: -32700, "Parse error: one JSON-RPC message per line")
        }
        // Which of the two a decoder keeps is its choice (an `id`, a tool's `k`): neither counts.
        // Refused with the request's id, which a client waits on (id null only where none reads).
        let keys = CanonicalJSON.checkKeys(Array(line.utf8), maxBytes: Self.maximumLineBytes)
        guard keys == .unique else {
            // Unreadable to the key check but read by Foundation's decoder (a byte-order mark,
            // nesting deeper than 64): its keys cannot be vouched for either.
            let refusal = keys == .repeated ? "Invalid Request: a key appears twice within one object"
                : "Invalid Request: JSON this server cannot check for repeated keys (a byte-order mark, or nesting deeper than \(CanonicalJSON.maxDepth))"
            // Requests only: a response (a `result` or an `error`, no `method`) is never answered.
            let ids = ((object as? [Any]) ?? [object]).compactMap { $0 as? [String: Any] }
                .filter { $0["method"] != nil || ($0["result"] == nil && $0["error"] == nil) }
                .compactMap { $0["id"] }.filter { $0 is String || Self.isInteger($0) }
            guard !ids.isEmpty else { return Self.error(id: NSNull(), code: -32600, refusal) }
            let answers = ids.map { Self.error(id: $0, code: -32600, refusal) }
            return object is [Any] ? answers : answers[0]
        }
        guard let batch = object as? [Any] else { return handle(message: object) }
        guard !batch.isEmpty else { return Self.error(id: NSNull(), code: -32600, "Invalid Request: an empty batch") }
        let answers = batch.compactMap(handle(message:))
        return answers.isEmpty ? nil : answers
    }

    /// The answer to one message (nil for notifications and responses).
    func handle(message object: Any) -> [String: Any]? {
        guard let message = object as? [String: Any] else {
            return Self.error(id: NSNull(), code: -32600, "Invalid Request: a message is a JSON object")
        }
        // A response to us (none is expected): not answered.
        if message["method"] == nil, message["result"] != nil || message["error"] != nil { return nil }
        guard let id = message["id"] else {
            // A notification, when its method is a string; else an invalid request.
            if message["method"] is String { return nil }
            return Self.error(id: NSNull(), code: -32600, "Invalid Request: `method` must be a string")
        }
        guard id is String || Self.isInteger(id) else {
            return Self.error(id: NSNull(), code: -32600, "Invalid Request: `id` must be a string or an integer")
        }
        guard message["jsonrpc"] as? String == "2.0", let method = message["method"] as? String else {
            return Self.error(id: id, code: -32600, "Invalid Request: `jsonrpc` must be \"2.0\" and `method` a string")
        }
        guard message["params"] == nil || message["params"] is [String: Any] else {
            return Self.error(id: id, code: -32602, "Invalid params: `params` must be an object")
        }
        let params = message["params"] as? [String: Any] ?? [:]
        switch method {
        case "initialize":
            let asked = params["protocolVersion"] as? String ?? ""
            let version = Self.protocolVersions.contains(asked) ? asked : Self.protocolVersions.last!
            return Self.result(id: id, [
                "protocolVersion": version,
                "capabilities": ["tools": ["listChanged": false]],
                "serverInfo": ["name": "cairn", "title": "Cairn offline knowledge base", "version": "1"],
                "instructions": Self.instructions,
            ])
        case "ping":
            return Self.result(id: id, [:])
        case "tools/list":
            return Self.result(id: id, ["tools": MCPTools.definitions])
        case "tools/call":
            guard let name = params["name"] as? String, MCPTools.names.contains(name) else {
                return Self.error(id: id, code: -32602, "Unknown tool: \(params["name"] as? String ?? "(none)")")
            }
            guard params["arguments"] == nil || params["arguments"] is [String: Any] else {
                return Self.error(id: id, code: -32602, "Invalid params: `arguments` must be an object")
            }
            return Self.result(id: id, tools.call(name, arguments: params["arguments"] as? [String: Any] ?? [:]))
        default:
            return Self.error(id: id, code: -32601, "Method not found: \(method)")
        }
    }

    /// Whether a decoded JSON value is an integer (not a boolean, not a fraction).
    static func isInteger(_ value: Any) -> Bool { integer(value) != nil }

    /// A decoded JSON number as an integer: nil for a boolean, a fraction or a number beyond
    /// ±2^53.
    static func integer(_ value: Any) -> Int? {
        guard let number = value as? NSNumber, String(cString: number.objCType) != "c" else { return nil }
        let double = number.doubleValue
        guard double.rounded() == double, abs(double) <= 9_007_199_254_740_992 else { return nil }
        return Int(double)
    }

    static func result(id: Any, _ result: [String: Any]) -> [String: Any] {
        ["jsonrpc": "2.0", "id": id, "result": result]
    }

    static func error(id: Any, code: Int, _ message: String) -> [String: Any] {
        ["jsonrpc": "2.0", "id": id, "error": ["code": code, "message": message]]
    }

    static func encode(_ object: Any) -> Data {
        (try? JSONSerialization.data(withJSONObject: object, options: [.withoutEscapingSlashes, .sortedKeys]))
            ?? Data(#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}"#.utf8)
    }
}
