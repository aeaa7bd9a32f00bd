import CairnSearch
import CairnTestSupport
import Foundation
import Testing

/// `POST /v1/channels/<c>/search` on a real `cairn-server serve` process, checked against a
/// real `cairnd` that synced the same version from that server: same engine, same JSON.
@Suite("Online search: cairn-server answers like cairnd", .offCooperativePool, .serialized)
struct OnlineSearchTests {
    static let version1 = Workspace.version1
    static let version2 = Workspace.version2

    /// `publishAndServe`, and the field channel's search URL once it answers from version 1.
    static func answeringVersion1() async throws -> (Workspace, Process, search: String) {
        let (workspace, server, url) = try await publishAndServe()
        let search = url + "/v1/channels/field/search"
        #expect(try await post(search, #"{"query": "crank radio"}"#).body["version"] as? Int == 1)
        return (workspace, server, search)
    }

    /// After a newer version was refused: a search still answers from version 1, and the server's
    /// log says the newest version could not be loaded. Returns the log.
    static func expectVersion1StillAnswers(_ workspace: Workspace, _ search: String) async throws -> String {
        let answer = try await post(search, #"{"query": "crank radio"}"#)
        #expect(answer.status == 200)
        #expect(answer.body["version"] as? Int == 1)
        let log = (try? String(contentsOfFile: workspace.folder + "/server/daemon.log", encoding: .utf8)) ?? ""
        #expect(log.contains("cannot load the channel's newest version"))
        return log
    }

    /// Version 1 published, and a server with online search on (cache and key in the workspace;
    /// `extra` config lines after them).
    static func publishAndServe(extra: String = "") async throws -> (Workspace, Process, url: String) {
        let workspace = try await Workspace.make()
        try await workspace.publishOnThread(Self.version1)
        let config = workspace.folder + "/server.conf"
        try """
            online_search = true
            search_cache = \(workspace.folder)/search-cache
            search_trusted_key = \(workspace.publicKey)
            \(extra)
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let (process, url, _) = try await workspace.serve(arguments: ["--config", config])
        return (workspace, process, url)
    }

    /// `curl` POSTing `body` (status and body); `socket` for cairnd's Unix socket.
    static func post(_ url: String, _ body: String, contentType: String = "application/json", method: String = "POST",
                     socket: String? = nil) async throws -> (status: Int, body: [String: Any]) {
        try Tools.requireCurl()
        var arguments = ["-s", "-X", method, "-H", "Content-Type: \(contentType)", "--data-binary", body,
                         "-w", "\n%{http_code}", url]
        if let socket { arguments = ["--unix-socket", socket] + arguments }
        let run = try await CairnTestSupport.run("/usr/bin/curl", arguments)
        guard run.status == 0 else { throw StepFailed("curl exited \(run.status): \(run.stderr)") }
        let lines = run.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let status = Int(lines.last ?? "") ?? 0
        let json = lines.dropLast().joined(separator: "\n")
        return (status, (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any] ?? [:])
    }

    static func stateRoot(_ workspace: Workspace) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: workspace.repo + "/channels/field/manifest.json"))
        let manifest = (try JSONSerialization.jsonObject(with: data) as! [String: Any])["manifest"] as! [String: Any]
        return manifest["state_root"] as! String
    }

    /// Ids and fused scores of an answer, in rank order.
    static func ranking(_ answer: [String: Any]) -> [String] {
        ((answer["results"] as? [[String: Any]]) ?? []).map {
            "\(($0["chunk"] as? [String: Any])?["id"] ?? "?") \($0["fused_score"] ?? "?") \($0["dense_score"] ?? "-")"
        }
    }

    @Test("Given a published channel, when the server and a cairnd synced from it get the same searches, then both answer the same results from the newest version; a new publish is picked up")
    func sameAnswersAsDaemon() async throws {
        let (workspace, server, url) = try await Self.publishAndServe()
        defer { stopProcess(server) }
        let search = url + "/v1/channels/field/search"

        // When the server is asked, it answers from version 1, naming its state root.
        let first = try await Self.post(search, #"{"query": "boil water", "k": 4}"#)
        #expect(first.status == 200)
        #expect(first.body["version"] as? Int == 1)
        #expect(first.body["state_root"] as? String == (try Self.stateRoot(workspace)))
        #expect(first.body["dense_available"] as? Bool == true)
        #expect(first.body.keys.contains("online") && first.body["online"] is NSNull)
        #expect(Self.ranking(first.body).first?.hasPrefix("boil ") == true)

        // Then a cairnd that synced version 1 from this server answers the same searches alike.
        let deviceFolder = workspace.folder + "/device"
        try FileManager.default.createDirectory(atPath: deviceFolder, withIntermediateDirectories: true)
        let socket = deviceFolder + "/cairnd.sock"
        let daemon = try launch(Products.path("cairnd"),
                                ["--source", url, "--channel", "field", "--trusted-key", workspace.publicKey,
                                 "--data-dir", deviceFolder + "/data", "--socket", socket, "--poll-interval", "3600"],
                                logDirectory: deviceFolder)
        defer { stopProcess(daemon) }
        try await waitUntil("cairnd serves version 1", seconds: 60) {
            (try? await Self.post("http://localhost/v1/search", #"{"query": "radio"}"#, socket: socket))?.body["version"] as? Int == 1
        }
        for body in [#"{"query": "boil water", "k": 4}"#, #"{"query": "flood safe routes", "k": 4, "mode": "dense"}"#,
                     #"{"query": "crank radio power", "mode": "lexical"}"#, #"{"query": "storm flood", "mode": "rrf", "k": 3}"#,
                     #"{"query": "water", "filter": {"scenario": "flood"}, "min_similarity": -1}"#] {
            let fromServer = try await Self.post(search, body)
            let fromDaemon = try await Self.post("http://localhost/v1/search", body, socket: socket)
            #expect(fromServer.status == 200 && fromDaemon.status == 200)
            #expect(!Self.ranking(fromServer.body).isEmpty)
            #expect(Self.ranking(fromServer.body) == Self.ranking(fromDaemon.body), "\(body)")
            for key in ["version", "state_root", "mode", "fusion", "dense_available"] {
                #expect("\(fromServer.body[key] ?? "absent")" == "\(fromDaemon.body[key] ?? "absent")", "\(key) for \(body)")
            }
        }

        // When version 2 is published, the next search answers from it.
        try await workspace.publishOnThread(Self.version2)
        let second = try await Self.post(search, #"{"query": "sandbags pyramid", "k": 4}"#)
        #expect(second.status == 200)
        #expect(second.body["version"] as? Int == 2)
        #expect(second.body["state_root"] as? String == (try Self.stateRoot(workspace)))
        #expect(Self.ranking(second.body).first?.hasPrefix("sandbag ") == true)
        #expect(!Self.ranking(second.body).contains { $0.hasPrefix("storm ") })
    }

    @Test("Given online search on, when bad requests arrive, then the server answers each with the daemon's status and code")
    func badRequests() async throws {
        let (_, server, url) = try await Self.publishAndServe()
        defer { stopProcess(server) }
        let search = url + "/v1/channels/field/search"
        let longQuery = String(repeating: "a", count: SearchBody.maximumQueryBytes + 1)
        let cases: [(body: String, contentType: String, status: Int, code: String)] = [
            ("{", "application/json", 400, "bad_json"),
            (#"{"k": 3}"#, "application/json", 400, "missing_field"),
            (#"{"query": "water", "colour": 1}"#, "application/json", 400, "unknown_field"),
            (#"{"query": "water", "mode": "fuzzy"}"#, "application/json", 400, "bad_mode"),
            (#"{"query": "water", "k": 0}"#, "application/json", 400, "bad_k"),
            (#"{"query": "   "}"#, "application/json", 400, "empty_query"),
            (#"{"query": "water", "min_similarity": 2}"#, "application/json", 400, "bad_min_similarity"),
            (#"{"query": "\#(longQuery)"}"#, "application/json", 413, "query_too_long"),
            (#"{"query": "water", "pad": "\#(String(repeating: "x", count: 70_000))"}"#, "application/json", 413, "body_too_large"),
            (#"{"query": "water"}"#, "text/plain", 415, "bad_content_type"),
            (#"{"query": "water", "channels": ["nope"]}"#, "application/json", 400, "unknown_channel"),
        ]
        for item in cases {
            let answer = try await Self.post(search, item.body, contentType: item.contentType)
            #expect(answer.status == item.status, "\(item.code)")
            #expect(answer.body["code"] as? String == item.code)
            #expect((answer.body["message"] as? String)?.isEmpty == false)
        }
        let wrongMethod = try await Self.post(search, "", method: "PUT")
        #expect(wrongMethod.status == 405 && wrongMethod.body["code"] as? String == "method_not_allowed")
        let unknown = try await Self.post(url + "/v1/channels/nosuch/search", #"{"query": "water"}"#)
        #expect(unknown.status == 404 && unknown.body["code"] as? String == "channel_not_found")
        let badName = try await Self.post(url + "/v1/channels/UPPER/search", #"{"query": "water"}"#)
        #expect(badName.status == 404 && badName.body["code"] as? String == "channel_not_found")
        // And after all that the channel still answers, also when "channels" names it.
        #expect(try await Self.post(search, #"{"query": "water"}"#).status == 200)
        #expect(try await Self.post(search, #"{"query": "water", "channels": ["field"]}"#).status == 200)
    }

    @Test("Given a channel answering from version 1, when its manifest is replaced by one that fails verification, then version 1 keeps answering and the refusal is logged; a good publish then takes over")
    func refusedManifestKeepsLastGood() async throws {
        let (workspace, server, search) = try await Self.answeringVersion1()
        defer { stopProcess(server) }

        // When the manifest's signature no longer matches (one byte of the signed part changed).
        let manifestPath = workspace.repo + "/channels/field/manifest.json"
        let good = try String(contentsOfFile: manifestPath, encoding: .utf8)
        try good.replacingOccurrences(of: "\"chunk_count\":4", with: "\"chunk_count\":5")
            .write(toFile: manifestPath, atomically: true, encoding: .utf8)
        #expect(try String(contentsOfFile: manifestPath, encoding: .utf8) != good)
        _ = try await Self.expectVersion1StillAnswers(workspace, search)

        // Then a proper publish is picked up.
        try await workspace.publishOnThread(Self.version2)
        #expect(try await Self.post(search, #"{"query": "sandbags pyramid"}"#).body["version"] as? Int == 2)
    }

    @Test("Given a new version whose snapshot blob is damaged in the repository, when searched, then version 1 keeps answering and the log names the blob as corrupt; once the blob is mended, version 2 answers without the manifest changing")
    func damagedSnapshotKeepsLastGood() async throws {
        let (workspace, server, search) = try await Self.answeringVersion1()
        defer { stopProcess(server) }

        // Version 2 is published, then one byte of its snapshot blob changes (same size), before
        // the server next looks at the channel.
        try await workspace.publishOnThread(Self.version2)
        let manifest = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: workspace.repo + "/channels/field/manifest.json")))
        let snapshot = try #require(((manifest as? [String: Any])?["manifest"] as? [String: Any])?["snapshot"] as? [String: Any])
        let hex = try #require(snapshot["sha256"] as? String)
        let blob = workspace.repo + "/blobs/sha256/\(hex.prefix(2))/\(hex)"
        let good = try [UInt8](Data(contentsOf: URL(fileURLWithPath: blob)))
        var bytes = good
        bytes[bytes.count / 2] ^= 0xFF
        chmod(blob, 0o644)
        try Data(bytes).write(to: URL(fileURLWithPath: blob))

        let log = try await Self.expectVersion1StillAnswers(workspace, search)
        #expect(log.contains("\(hex.prefix(12))… is missing or corrupt"))
        #expect(log.contains("tried again in 5 s"))

        // The blob mended (a mirror's copy that arrived late), with the manifest unchanged: the
        // load is tried again after its delay, and version 2 answers.
        try Data(good).write(to: URL(fileURLWithPath: blob))
        try await waitUntil("online search answers from version 2", seconds: 60) {
            (try? await Self.post(search, #"{"query": "crank radio"}"#))?.body["version"] as? Int == 2
        }
    }

    @Test("Given online search pinned to root 1 (search_trusted_root), when the signing key rotates, then the publisher refuses the revoked key and the version signed by the new key (unknown to root 1) answers")
    func followsRootRotations() async throws {
        let workspace = try await Workspace.make()
        let rootKey = try await onThread { try workspace.keygen("root") }
        let newKey = try await onThread { try workspace.keygen("new") }
        try await onThread {
            try workspace.server(["root", "init", "--repo", workspace.repo, "--root-key", rootKey, "--signing-key", workspace.publicKey])
        }
        try await workspace.publishOnThread(Self.version1)
        let config = workspace.folder + "/server.conf"
        try """
            online_search = true
            search_cache = \(workspace.folder)/search-cache
            search_trusted_root = \(workspace.repo)/root/1.root.json
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let (server, url, _) = try await workspace.serve(arguments: ["--config", config])
        defer { stopProcess(server) }
        let search = url + "/v1/channels/field/search"
        #expect(try await Self.post(search, #"{"query": "crank radio"}"#).body["version"] as? Int == 1)

        // Root 2 revokes the workspace's key: publishing with it is refused; the new key's version 2
        // answers, which only a walk from root 1 to root 2 can accept.
        try await onThread {
            try workspace.server(["root", "rotate", "--repo", workspace.repo, "--sign-with", rootKey,
                                  "--add-signing-key", String(newKey.dropLast(4)) + ".pub", "--remove-signing-key", workspace.publicKey])
        }
        let revoked = try await onThread { try workspace.tryPublish(Self.version2, keys: [workspace.key]) }
        #expect(revoked.status == 64 && revoked.error.contains("not a signing key of root 2"))
        try await onThread { try workspace.publish(Self.version2, keys: [newKey]) }
        #expect(try await Self.post(search, #"{"query": "sandbags pyramid"}"#).body["version"] as? Int == 2)
    }

    @Test("Given a search cache whose model folder lost a file and which holds a build abandoned days ago, when the server starts again, then the model is copied again (dense search answers, not lexical only) and the abandoned folder is removed")
    func damagedCacheMended() async throws {
        let (workspace, server, _) = try await Self.answeringVersion1()
        stopProcess(server)
        let cache = workspace.folder + "/search-cache"
        let models = try FileManager.default.contentsOfDirectory(atPath: cache + "/models").filter { !$0.hasPrefix(".") }
        let model = cache + "/models/" + (try #require(models.first))
        try FileManager.default.removeItem(atPath: model + "/model.safetensors")
        let abandoned = cache + "/field/.partial-abandoned", recent = cache + "/field/.partial-building"
        for folder in [abandoned, recent] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -3 * 86_400)], ofItemAtPath: abandoned)

        let (again, url, _) = try await workspace.serve(arguments: ["--config", workspace.folder + "/server.conf"])
        defer { stopProcess(again) }
        let answer = try await Self.post(url + "/v1/channels/field/search", #"{"query": "crank radio", "mode": "hybrid"}"#)
        #expect(answer.status == 200 && answer.body["dense_available"] as? Bool == true, "\(answer.body)")
        #expect(FileManager.default.fileExists(atPath: model + "/model.safetensors"))
        #expect(!FileManager.default.fileExists(atPath: abandoned) && FileManager.default.fileExists(atPath: recent))
    }

    @Test("Given search_allow_origin naming one web origin, when a page of that origin calls online search from a browser, then the preflight gets 204 with the CORS headers and the answer names the origin; another origin gets neither")
    func browserOrigins() async throws {
        let (_, server, url) = try await Self.publishAndServe(extra: "search_allow_origin = https://app.example")
        defer { stopProcess(server) }
        let search = url + "/v1/channels/field/search"
        /// The status line and headers (lowercased names) of a request from `origin`.
        func head(_ method: String, origin: String) async throws -> (status: Int, headers: [String: String]) {
            var arguments = ["-s", "-o", "/dev/null", "-D", "-", "-X", method, "-H", "Origin: \(origin)"]
            if method == "POST" { arguments += ["-H", "Content-Type: application/json", "--data-binary", #"{"query": "crank radio"}"#] }
            else { arguments += ["-H", "Access-Control-Request-Method: POST", "-H", "Access-Control-Request-Headers: content-type"] }
            let run = try await CairnTestSupport.run("/usr/bin/curl", arguments + [search])
            let lines = run.stdout.components(separatedBy: "\r\n")
            let status = Int(lines.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            return (status, headers)
        }
        try Tools.requireCurl()
        let preflight = try await head("OPTIONS", origin: "https://app.example")
        #expect(preflight.status == 204 && preflight.headers["access-control-allow-origin"] == "https://app.example"
                && preflight.headers["access-control-allow-methods"] == "POST"
                && preflight.headers["access-control-allow-headers"]?.lowercased() == "content-type", "\(preflight)")
        let answer = try await head("POST", origin: "https://app.example")
        #expect(answer.status == 200 && answer.headers["access-control-allow-origin"] == "https://app.example"
                && answer.headers["vary"] == "Origin", "\(answer)")
        let otherPreflight = try await head("OPTIONS", origin: "https://elsewhere.example")
        #expect(otherPreflight.status == 405 && otherPreflight.headers["access-control-allow-origin"] == nil, "\(otherPreflight)")
        let other = try await head("POST", origin: "https://elsewhere.example")
        #expect(other.status == 200 && other.headers["access-control-allow-origin"] == nil, "\(other)")
    }

    @Test("Given online search off (the default), when a search is posted, then it is 404 search_disabled and files are still served")
    func disabledByDefault() async throws {
        let workspace = try await Workspace.make()
        try await workspace.publishOnThread(Self.version1)
        let (server, url, _) = try await workspace.serve()
        defer { stopProcess(server) }
        let answer = try await Self.post(url + "/v1/channels/field/search", #"{"query": "water"}"#)
        #expect(answer.status == 404)
        #expect(answer.body["code"] as? String == "search_disabled")
        let manifest = try await CairnTestSupport.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}",
                                                                       url + "/channels/field/manifest.json"])
        #expect(manifest.stdout == "200")
    }
}
