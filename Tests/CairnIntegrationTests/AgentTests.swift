import CairnTestSupport
import Foundation
import Testing

/// `cairn mcp` driven by a client nobody here wrote: the official MCP Python SDK's stdio client
/// (PyPI `mcp`, in the venv scripts/test makes), through Tests/Reference/mcp_check.py, against a
/// real cairnd on its socket.
@Suite("Agents: cairn mcp with the MCP Python SDK (real processes)", .offCooperativePool, .serialized)
struct AgentTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    /// The venv's python when it can import `module`.
    static func python(with module: String) async throws -> String? {
        guard let python = ProcessInfo.processInfo.environment["CAIRN_PYTHON"],
              FileManager.default.isExecutableFile(atPath: python) else { return nil }
        return try await run(python, ["-c", "import \(module)"]).status == 0 ? python : nil
    }

    @Test("Given a device serving version 1, when the MCP SDK's client starts cairn mcp, then it initializes, lists three tools, and search, get and status answer; errors are tool errors with the daemon's code, and an absent cairnd fails fast")
    func mcpWithTheOfficialClient() async throws {
        let python = try requireOrSkip(try await Self.python(with: "mcp.client.stdio"),
                                       "the `mcp` package is not in the venv named by CAIRN_PYTHON; run the suite with scripts/test")
        let rig = try await ServedDevice()
        defer { rig.stop() }
        let (workspace, device) = (rig.workspace, rig.device)

        let check = try await run(python, [Self.repositoryRoot + "/Tests/Reference/mcp_check.py",
                                           "--cairn", Products.path("cairn"), "--socket", device.socket,
                                           "--query", "boil water", "--expect-id", "boil",
                                           "--dead-socket", workspace.folder + "/no-cairnd.sock"])
        #expect(check.status == 0, "\(check.stdout)\n\(check.stderr)")
        let summary = check.stdout.split(separator: "\n").last.flatMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        } ?? [:]
        #expect(summary["protocol_version"] as? String == "2025-11-25")
        #expect((summary["search_ids"] as? [String])?.first == "boil")
        #expect(summary["bad_arguments_code"] as? String == "bad_arguments")
        #expect(summary["bad_request_code"] as? String == "unknown_channel")
        #expect(summary["unreachable_code"] as? String == "unavailable")
        #expect((summary["freshness"] as? String)?.hasPrefix("Knowledge base version 1") == true)
    }

    @Test("Given a device serving version 1, when the Python client (clients/python) and its LangChain retriever ask it, then status, search (each result naming its channel and version, a search scoped to that channel, an unknown channel refused), get, the daemon's error codes and an absent socket all come back typed")
    func pythonClient() async throws {
        let python = try requireOrSkip(try await Self.python(with: "langchain_core"),
                                       "langchain-core is not in the venv named by CAIRN_PYTHON; run the suite with scripts/test")
        let rig = try await ServedDevice()
        defer { rig.stop() }
        let (workspace, device) = (rig.workspace, rig.device)

        let check = try await run(python, [Self.repositoryRoot + "/clients/python/tests/check_client.py",
                                           "--socket", device.socket, "--query", "boil water", "--expect-id", "boil",
                                           "--chunk-id", "radio", "--require-langchain"])
        #expect(check.status == 0, "\(check.stdout)\n\(check.stderr)")
        #expect(check.stdout.contains("0 failed") && check.stdout.contains("0 skipped"), "\(check.stdout)")
    }

    /// A tool error's code and message, read from its text (`code: message`); nil unless the
    /// result is an error that carries no structuredContent (the tool's outputSchema describes
    /// its answer, and a client may check an error's structuredContent against it too).
    static func failure(_ result: [String: Any]?) -> (code: String, message: String)? {
        guard result?["isError"] as? Bool == true, result?["structuredContent"] == nil,
              let text = (result?["content"] as? [[String: Any]])?.first?["text"] as? String,
              let colon = text.range(of: ": ") else { return nil }
        return (String(text[..<colon.lowerBound]), String(text[colon.upperBound...]))
    }

    /// `cairn mcp` fed `lines` on standard input (then end of input): its answers, by id (a
    /// null id as "null"), and its exit status.
    /// `raw`: bytes written after the lines (one that is not UTF-8).
    static func mcp(_ socket: String, _ lines: [String], raw: [UInt8] = [], folder: String,
                    timeout: Int = 20) async throws -> (answers: [String: [String: Any]], count: Int, status: Int32, order: [String]) {
        let input = folder + "/mcp-input-\(UUID().uuidString).jsonl"
        try (Data((lines.joined(separator: "\n") + "\n").utf8) + raw).write(to: URL(fileURLWithPath: input))
        let finished = try await onThread { () throws -> (String, Int32) in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Products.path("cairn"))
            process.arguments = ["mcp", "--socket", socket, "--timeout", String(timeout)]
            process.environment = childEnvironment()
            process.standardInput = FileHandle(forReadingAtPath: input)
            let out = childPipe()
            process.standardOutput = out.fileHandleForWriting
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try process.spawn()
            out.started()
            let stdout = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (String(decoding: stdout, as: UTF8.self), process.terminationStatus)
        }
        var answers: [String: [String: Any]] = [:]
        var order: [String] = []
        let replies = finished.0.split(separator: "\n")
        for line in replies {
            // A batch's answers come as one array.
            let decoded = try? JSONSerialization.jsonObject(with: Data(line.utf8))
            for answer in (decoded as? [[String: Any]]) ?? [decoded as? [String: Any]].compactMap({ $0 }) {
                let id = answer["id"].map { $0 is NSNull ? "null" : "\($0)" } ?? "none"
                answers[id] = answer
                order.append(id)
            }
        }
        return (answers, replies.count, finished.1, order)
    }

    /// A served device whose cairnd is stopped (SIGSTOP: it takes connections but answers
    /// nothing) while `body` runs.
    static func withStoppedDaemon(_ body: (ServedDevice) async throws -> Void) async throws {
        let rig = try await ServedDevice()
        defer { rig.stop() }
        kill(rig.device.process.processIdentifier, SIGSTOP)
        defer { kill(rig.device.process.processIdentifier, SIGCONT) }
        try await body(rig)
    }

    @Test("Given cairnd stopped (SIGSTOP: it takes connections but answers nothing), when an agent sends five searches (one more than run at once), a ping and cancellations of the first and the fifth, then the ping is answered first, the three others end as unavailable after --timeout, and neither cancelled one gets an answer")
    func mcpRunsRequestsAtOnceAndDropsCancelled() async throws {
        try await Self.withStoppedDaemon { rig in
            let search = { (id: Int) in
                #"{"jsonrpc":"2.0","id":\#(id),"method":"tools/call","params":{"name":"search","arguments":{"query":"boil water"}}}"#
            }
            let cancel = { (id: Int) in
                #"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":\#(id),"reason":"user"}}"#
            }
            // Four run at once; the fifth waits, and must neither hold the ping behind it (until
            // 2026-12-06 the reader waited for a free slot before it read the next line) nor run
            // once cancelled.
            let lines = [search(1), search(3), search(4), search(5), search(6), #"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
                         cancel(6), cancel(1)]
            let (answers, _, status, order) = try await Self.mcp(rig.device.socket, lines, folder: rig.workspace.folder, timeout: 10)
            #expect(status == 0)
            #expect(order.first == "2" && Set(order) == ["2", "3", "4", "5"], "\(order)")
            for id in ["3", "4", "5"] {
                let result = answers[id]?["result"] as? [String: Any]
                #expect(Self.failure(result)?.code == "unavailable", "\(String(describing: result))")
            }
            #expect(answers["1"] == nil && answers["6"] == nil)
        }
    }

    @Test("Given cairnd stopped (a search held), when an agent sends a second call with the same id while the first runs, then the second is refused at once (-32600, before the ping after it), and the first still ends with its own answer")
    func mcpRefusesAnIdInUse() async throws {
        try await Self.withStoppedDaemon { rig in
            let lines = [#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"query":"boil water"}}}"#,
                         #"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"status","arguments":{}}}"#,
                         #"{"jsonrpc":"2.0","id":2,"method":"ping"}"#]
            let (answers, _, status, order) = try await Self.mcp(rig.device.socket, lines, folder: rig.workspace.folder, timeout: 5)
            #expect(status == 0)
            // The refusal comes as its line is read, before the ping; the search's answer at
            // --timeout (cairnd answers nothing), after it. Until 2026-12-07 both calls ran, and
            // both answered at --timeout.
            #expect(order == ["1", "2", "1"], "\(order)")
            #expect(Self.failure(answers["1"]?["result"] as? [String: Any])?.code == "unavailable", "\(String(describing: answers["1"]))")
        }
    }

    @Test("Given cairnd stopped and cairn mcp's queue full (4 calls running, 1,024 waiting), when one more call and a batch of two come, then each of the three is answered -32000 busy with its id, none left unanswered")
    func mcpAnswersEveryRequestWhenBusy() async throws {
        try await Self.withStoppedDaemon { rig in
            let call = { (id: Int) in
                #"{"jsonrpc":"2.0","id":\#(id),"method":"tools/call","params":{"name":"status","arguments":{}}}"#
            }
            let queued = (1...1028).map(call)
            let batch = "[" + call(3001) + "," + call(3002) + "]"
            // The queued calls are cancelled once the busy answers are asked for: the waiting ones
            // end at once, the four running at --timeout.
            let cancels = (1...1028).map { #"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":\#($0)}}"# }
            let (answers, _, status, _) = try await Self.mcp(rig.device.socket, queued + [call(2000), batch] + cancels,
                                                             folder: rig.workspace.folder, timeout: 5)
            #expect(status == 0)
            for id in ["2000", "3001", "3002"] {
                #expect((answers[id]?["error"] as? [String: Any])?["code"] as? Int == -32000, "\(id): \(String(describing: answers[id]))")
            }
        }
    }

    @Test("Given a passage of 3,000 characters with a source (a JSON record, kept whole), when cairn mcp searches, then its text line names its id and source and is cut at 2,000 characters saying that get gives it whole; structuredContent cuts it there too, saying so and how long it is, counting Unicode scalars (a letter with 2,500 combining marks is cut); get keeps it whole; a tag no passage has is said in a note")
    func mcpCutsLongPassagesAndNamesSources() async throws {
        let workspace = try await Workspace.make()
        let long = String(repeating: "Boil the water for one minute before you drink it. ", count: 60)
        // One grapheme cluster of 2,501 Unicode scalars: a letter and 2,500 combining marks.
        let accented = "Purify rainwater before you drink it: x" + String(repeating: "\u{0301}", count: 2_500)
        let source = workspace.folder + "/kb-long.json"
        let records: [[String: Any]] = [
            ["id": "boil-long", "title": "Boiling", "content": long, "source": "Field Manual p. 12"],
            ["id": "radio", "title": "Radio", "content": "A crank radio keeps working when the power is out."],
            ["id": "accents", "title": "Accents", "content": accented],
        ]
        try JSONSerialization.data(withJSONObject: records).write(to: URL(fileURLWithPath: source))
        let publish = try Binaries.run("cairn-server", ["publish", "--repo", workspace.repo, "--channel", "field", "--source", source,
                                                        "--model-dir", workspace.model, "--no-cache", "--key", workspace.key],
                                       in: workspace.folder)
        try #require(publish.status == 0, "\(publish.error)")
        let (server, url, _) = try await workspace.serve()
        defer { stopProcess(server) }
        let device = try DeviceProcess(workspace, sources: [url])
        defer { device.stop() }
        try await device.waitForVersion(1)
        let lines = [
            #"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"query":"boil water","k":3}}}"#,
            #"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get","arguments":{"id":"boil-long"}}}"#,
            #"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search","arguments":{"query":"boil water","tags":["Water"]}}}"#,
            #"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get","arguments":{"id":"boil-long","version":1}}}"#,
            #"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"get","arguments":{"id":"boil-long","version":2}}}"#,
        ]
        let (answers, _, status, _) = try await Self.mcp(device.socket, lines, folder: workspace.folder)
        #expect(status == 0)
        let found = answers["1"]?["result"] as? [String: Any]
        let text = ((found?["content"] as? [[String: Any]])?.first?["text"] as? String) ?? ""
        // Looked up by id: the three passages' order is the model's to decide.
        let line = String(try #require(text.split(separator: "\n").first { $0.hasPrefix("[") && $0.contains("(id: boil-long") }, "\(text)"))
        // The freshness line says when the publisher made the version that answers.
        #expect(text.hasPrefix("Knowledge base version 1 (channel field), published 20"), "\(text.prefix(120))")
        #expect(line.contains("(id: boil-long, source: Field Manual p. 12)"), "\(line)")
        #expect(line.contains("… (cut; `get` with this id gives the whole passage)") && line.count < 2_200, "\(line.count)")
        // A host may hand the model structuredContent instead of the text: the same cut.
        let results = (found?["structuredContent"] as? [String: Any])?["results"] as? [[String: Any]]
        let boil = results?.first { $0["id"] as? String == "boil-long" }
        #expect(boil?["content"] as? String == String(long.prefix(2_000)))
        #expect(boil?["cut"] as? Bool == true && boil?["characters"] as? Int == long.count,
                "\(String(describing: boil?.filter { $0.key != "content" }))")
        // Characters are Unicode scalars, as JSON Schema and Python count them: one cluster of
        // thousands is cut too, where a cut by grapheme clusters bounded nothing.
        let marks = results?.first { $0["id"] as? String == "accents" }
        #expect(marks?["cut"] as? Bool == true && (marks?["content"] as? String)?.unicodeScalars.count == 2_000
                && marks?["characters"] as? Int == accented.unicodeScalars.count, "\(String(describing: marks?.filter { $0.key != "content" }))")
        // A short passage comes whole, unmarked.
        let short = results?.first { $0["id"] as? String == "radio" }
        #expect(results?.count == 3 && short?["cut"] == nil && short?["characters"] == nil
                && short?["content"] as? String == "A crank radio keeps working when the power is out.", "\(String(describing: results))")
        let got = answers["2"]?["result"] as? [String: Any]
        let gotText = ((got?["content"] as? [[String: Any]])?.first?["text"] as? String) ?? ""
        #expect(gotText.hasSuffix(long))
        // Hosts give a model the text alone: the source it is asked to cite is in it.
        #expect(gotText.hasPrefix("Boiling (id: boil-long, source: Field Manual p. 12, "), "\(gotText.prefix(80))")
        // A model's guessed tag matches nothing: said, not "No passage matches" alone.
        let filtered = answers["3"]?["result"] as? [String: Any]
        let filteredText = ((filtered?["content"] as? [[String: Any]])?.first?["text"] as? String) ?? ""
        #expect(filteredText.contains("Note: no passage has tag \"Water\", so nothing passed the filter."), "\(filteredText)")
        let unmatched = (filtered?["structuredContent"] as? [String: Any])?["unmatched_filter"] as? [String: Any]
        #expect(unmatched?["tags"] as? [String] == ["Water"])
        // `get` pinned to the search's version: read back while it serves, refused once another does.
        #expect((answers["4"]?["result"] as? [String: Any])?["isError"] as? Bool == false)
        let moved = answers["5"]?["result"] as? [String: Any]
        #expect(Self.failure(moved)?.code == "version_changed",
                "\(String(describing: moved))")
    }

    @Test("Given cairn mcp, when a line is JSON but not an object or array (7, null), then it is an Invalid Request (-32600), not a Parse error; a line one byte over 4 MiB whose end comes in the read that brings its newline is refused as over the limit, with id null; the next line is answered")
    func mcpFragmentsAndALineJustOver() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let head = #"{"jsonrpc":"2.0","id":50,"method":"ping","params":{"pad":""#, tail = #""}}"#
        // 4 MiB + 1 bytes without its newline; the key check reads at most 4 MiB, and until
        // 2026-12-07 such a line was refused, with id 50, as JSON it could not check.
        let justOver = head + String(repeating: "x", count: (4 << 20) + 1 - head.utf8.count - tail.utf8.count) + tail
        let ping = #"{"jsonrpc":"2.0","id":51,"method":"ping"}"#
        // No cairnd: ping does not ask it. One run a line, so that each answer with id null is read.
        for (line, saying) in [("7", "Invalid Request"), ("null", "Invalid Request"), (justOver, "a line over")] {
            let run = try await Self.mcp(folder + "/absent.sock", [line, ping], folder: folder)
            #expect(run.status == 0 && run.order == ["null", "51"], "\(run.order)")
            let error = run.answers["null"]?["error"] as? [String: Any]
            #expect(error?["code"] as? Int == -32600 && (error?["message"] as? String)?.contains(saying) == true,
                    "\(line.prefix(40)): \(String(describing: error))")
        }
    }

    @Test("Given a cairnd from before 2026-12-06, which ignores ?version= and answers a chunk from the version it serves (6), when cairn get --version 5 and the MCP get tool with version 5 ask, then each fails version_changed, and cairn get exits 1 with nothing on standard output")
    func versionPinHeldAgainstAnOlderDaemon() async throws {
        try requireOrSkip(FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"), "python3 is not installed (apt-get install python3)")
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let socket = folder + "/older.sock"
        // A stand-in for the older cairnd (no older binary is at hand): every request gets
        // version 6's chunk, whatever its query string.
        let body = #"{"id":"boil","title":"Boiling","content":"Boil water for one minute.","scenario":null,"tags":[],"version":6,"state_root":"00","channel":"field"}"#
        let script = """
            import os, socket, sys
            body = sys.argv[2].encode()
            s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1] + ".new"); s.listen(8)
            os.rename(sys.argv[1] + ".new", sys.argv[1])  # the socket file appears listening
            while True:
                c, _ = s.accept(); c.recv(65536)
                c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\n\\r\\n" % len(body) + body); c.close()
            """
        let peer = try launch("/usr/bin/python3", ["-c", script, socket, body], logDirectory: folder)
        defer { stopProcess(peer) }
        try await waitUntil("the stand-in listens") { FileManager.default.fileExists(atPath: socket) }
        let unpinned = try Binaries.run("cairn", ["--socket", socket, "get", "boil"], in: folder)
        #expect(unpinned.status == 0 && unpinned.output.contains("version 6"), "\(unpinned.output) \(unpinned.error)")
        for arguments in [["get", "boil", "--version", "5"], ["get", "boil", "--version", "5", "--json"]] {
            let pinned = try Binaries.run("cairn", ["--socket", socket] + arguments, in: folder)
            // Under --json the failure is the error object on standard output too.
            let expected = arguments.contains("--json")
                ? #"{"code":"version_changed","message":"version 5 no longer answers (version 6 does): search again for the passage as it is now"}"# + "\n" : ""
            #expect(pinned.status == 1 && pinned.output == expected, "\(arguments): \(pinned.output)")
            #expect(pinned.error == "cairn: version 5 no longer answers (version 6 does): search again for the passage as it is now (version_changed)\n",
                    "\(pinned.error)")
        }
        let line = #"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get","arguments":{"id":"boil","version":5}}}"#
        let (answers, _, _, _) = try await Self.mcp(socket, [line], folder: folder)
        let moved = answers["1"]?["result"] as? [String: Any]
        #expect(Self.failure(moved)?.code == "version_changed",
                "\(String(describing: moved))")
    }

    @Test("Given cairn mcp, when a tool gets an argument its schema does not name, of the wrong type or out of range, then the call is a bad_arguments tool error naming it; malformed JSON-RPC messages get -32600/-32602 with their id, notifications and responses no answer; a --timeout that is not a positive number of seconds is refused")
    func mcpRefusesWhatItCannotHonour() async throws {
        let rig = try await ServedDevice()
        defer { rig.stop() }
        func call(_ id: Int, _ tool: String, _ arguments: String) -> String {
            #"{"jsonrpc":"2.0","id":\#(id),"method":"tools/call","params":{"name":"\#(tool)","arguments":\#(arguments)}}"#
        }
        let refused: [(Int, String, String, String)] = [
            (1, "search", #"{"query":"boil water","top_k":3}"#, "top_k"),
            (2, "search", #"{"query":"boil water","k":"3"}"#, "`k`"),
            (3, "search", #"{"query":"boil water","k":21}"#, "`k`"),
            (4, "search", #"{"query":"boil water","k":true}"#, "`k`"),
            (5, "search", #"{"query":"boil water","k":2.5}"#, "`k`"),
            (6, "search", #"{"query":"boil water","tags":"flood"}"#, "`tags`"),
            (7, "search", #"{"query":"boil water","mode":"fuzzy"}"#, "`mode`"),
            (8, "search", #"{"query":"boil water","channel":7}"#, "`channel`"),
            (9, "status", #"{"verbose":true}"#, "verbose"),
            (10, "get", #"{"id":"boil","full":true}"#, "full"),
            // Nothing to search, or more than cairnd takes: said here, naming `query`.
            (11, "search", #"{"query":"\n\u200b"}"#, "`query`"),
            (12, "search", #"{"query":"\#(String(repeating: "w", count: 4_097))"}"#, "`query` is longer than 4096"),
            (13, "search", #"{"query":"boil water","channel":""}"#, "`channel`"),
        ]
        let lines = refused.map { call($0.0, $0.1, $0.2) } + [
            call(20, "search", #"{"query":"boil water","k":2.0,"tags":[]}"#),
            #"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            #"{"jsonrpc":"2.0","id":31}"#,
            #"{"jsonrpc":"2.0","id":32,"method":5}"#,
            #"{"id":33,"method":"ping"}"#,
            #"{"jsonrpc":"2.0","id":34,"method":"tools/call","params":{"name":"search","arguments":"boil"}}"#,
            #"{"jsonrpc":"2.0","id":35,"method":"ping","params":[1]}"#,
            #"[{"jsonrpc":"2.0","id":36,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":39,"method":"nope"}]"#,
            #"[]"#,
            #"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#,
            #"{"jsonrpc":"2.0","method":1}"#,
            #"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            #"{"jsonrpc":"2.0","id":37,"result":{}}"#,
            #"{"jsonrpc":"2.0","id":38,"method":"ping"}"#,
            // `k` twice: a decoder would keep one of them; the message is refused as a whole,
            // with its id (a client waits for it); in a batch, each member with an id.
            call(40, "search", #"{"query":"boil water","k":3,"k":50}"#),
            "[" + call(41, "search", #"{"query":"boil water","k":3,"k":50}"#) + #",{"jsonrpc":"2.0","id":42,"method":"ping"}]"#,
            #"{"jsonrpc":"2.0","method":"ping","method":"ping"}"#,
            // A response in such a batch is not answered.
            #"[{"jsonrpc":"2.0","id":43,"result":{}},{"jsonrpc":"2.0","id":44,"method":"ping","params":{"a":1,"a":2}}]"#,
            #"{"jsonrpc":"2.0","id":45,"method":"tools/list"}"#,
            // A line over 4 MiB is dropped as it comes (id null: none is read), and the next read;
            // CRLF line ends are taken.
            #"{"jsonrpc":"2.0","id":46,"method":"ping","params":{"pad":""# + String(repeating: "x", count: 5 << 20) + #""}}"#,
            #"{"jsonrpc":"2.0","id":47,"method":"ping"}"# + "\r",
            // Nested deeper than the key check reads, and a key twice in a line over 1 MiB: until
            // 2026-12-06 both went past the check unchecked.
            #"{"jsonrpc":"2.0","id":48,"method":"ping","params":{"a":"# + String(repeating: "[", count: 70) + String(repeating: "]", count: 70) + "}}",
            #"{"jsonrpc":"2.0","id":49,"method":"ping","params":{"pad":""# + String(repeating: "x", count: 3 << 19) + #"","a":1,"a":2}}"#,
            // An explicit null is an optional argument left out (not for `channel`).
            call(21, "search", #"{"query":"boil water","k":null,"mode":null,"scenario":null,"tags":null}"#),
        ]
        // A line that is not UTF-8: a string id decoded with U+FFFD would come back changed.
        let notUTF8 = Array(#"{"jsonrpc":"2.0","id":"a"#.utf8) + [0xFF] + Array(#"","method":"ping"}"#.utf8) + [0x0A]
        let (answers, count, status, order) = try await Self.mcp(rig.device.socket, lines, raw: notUTF8, folder: rig.workspace.folder)
        #expect(status == 0)
        for (id, tool, arguments, named) in refused {
            let result = answers["\(id)"]?["result"] as? [String: Any]
            let failure = Self.failure(result)
            #expect(failure?.code == "bad_arguments", "\(tool) \(arguments): \(String(describing: result))")
            #expect(failure?.message.contains(named) == true, "\(tool) \(arguments): \(String(describing: result))")
        }
        let found = answers["20"]?["result"] as? [String: Any]
        #expect(found?["isError"] as? Bool == false)
        #expect(((found?["structuredContent"] as? [String: Any])?["results"] as? [Any])?.count == 2)
        func errorCode(_ id: String) -> Int? { (answers[id]?["error"] as? [String: Any])?["code"] as? Int }
        // id null, an empty batch, a method that is not a string, a key named twice where no id
        // reads, a line too long, a line not UTF-8: answered with id null (six answers under one
        // key here, the last, the line not UTF-8's, kept). A batch is answered as one array, its
        // notification not.
        #expect(order.filter { $0 == "null" }.count == 6 && errorCode("null") == -32700, "\(order)")
        #expect(errorCode("40") == -32600 && errorCode("41") == -32600 && errorCode("42") == -32600)
        #expect(errorCode("44") == -32600 && answers["43"] == nil)
        #expect(answers["46"] == nil && answers["47"]?["result"] != nil)
        #expect(errorCode("48") == -32600 && errorCode("49") == -32600)
        #expect((answers["21"]?["result"] as? [String: Any])?["isError"] as? Bool == false, "\(String(describing: answers["21"]))")
        #expect(answers.keys.allSatisfy { !$0.contains("\u{FFFD}") }, "\(answers.keys.sorted())")
        // Every tool only reads: hosts need not ask before calling it. The query's limit is stated.
        let tools = (answers["45"]?["result"] as? [String: Any])?["tools"] as? [[String: Any]] ?? []
        #expect(tools.count == 3 && tools.allSatisfy { ($0["annotations"] as? [String: Any])?["readOnlyHint"] as? Bool == true })
        let search = tools.first { $0["name"] as? String == "search" }
        let query = ((search?["inputSchema"] as? [String: Any])?["properties"] as? [String: Any])?["query"] as? [String: Any]
        #expect(query?["maxLength"] as? Int == 4096 && query?["minLength"] as? Int == 1)
        #expect(answers["36"]?["result"] != nil && errorCode("39") == -32601)
        #expect(errorCode("31") == -32600 && errorCode("32") == -32600 && errorCode("33") == -32600)
        #expect(errorCode("34") == -32602 && errorCode("35") == -32602)
        #expect(answers["38"]?["result"] != nil)
        // 13 refusals, one search, six answers with id null (the long line's and the one not
        // UTF-8 too), 31…35, one batch line, 38, 40, the batch of 41 and 42, the batch of 44, the
        // list, 47, 48, 49, 21: no answer to the notifications (alone or as a whole batch) or to
        // the response.
        #expect(count == 13 + 1 + 6 + 5 + 1 + 1 + 3 + 1 + 1 + 3, "\(answers.keys.sorted())")
        #expect(answers["37"] == nil)

        // Why cairnd cannot be reached decides what to do: not "start cairnd" for a path too long.
        let tooLong = rig.workspace.folder + "/" + String(repeating: "s", count: 120) + ".sock"
        let far = try await Self.mcp(tooLong, [call(1, "search", #"{"query":"boil water"}"#)], folder: rig.workspace.folder)
        let unreachable = Self.failure(far.answers["1"]?["result"] as? [String: Any])
        #expect(unreachable?.message.contains("shorter than 108 bytes") == true, "\(String(describing: far.answers["1"]))")

        for timeout in ["0", "-1", "inf", "nan", "3000000"] {
            let run = try Binaries.run("cairn", ["mcp", "--socket", rig.device.socket, "--timeout", timeout], in: rig.workspace.folder)
            #expect(run.status == 2 && run.error.contains("--timeout"), "--timeout \(timeout): \(run.status) \(run.error)")
        }
    }
}
