public import Foundation

/// What a support helper throws when a step it depends on fails (keygen, publish, cp…).
public struct StepFailed: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A publisher's folder for process-level tests: the tiny model, a key pair from
/// `cairn-server keygen`, and a repository that `publish` fills (channel `field`).
public struct Workspace: Sendable {
    public typealias KB = [(id: String, text: String)]
    public let folder: String
    public let model: String
    public var repo: String { folder + "/repo" }
    public var key: String { folder + "/keys/publisher.key" }
    public var publicKey: String { folder + "/keys/publisher.pub" }
    public var manifestPath: String { repo + "/channels/field/manifest.json" }

    public init() throws {
        folder = try TemporaryDirectory.make()
        model = folder + "/model"
        try TinyModel.write(to: model)
        let keygen = try Binaries.run("cairn-server", ["keygen", "--out", folder + "/keys"], in: folder)
        guard keygen.status == 0 else { throw StepFailed("keygen: \(keygen.error)") }
    }

    /// A knowledge base file of `chunks`, each with distinct words.
    public static func knowledgeBase(_ chunks: KB, to path: String) throws {
        let records = chunks.map { ["id": $0.id, "title": $0.id, "content": $0.text, "scenario": "flood"] }
        try JSONSerialization.data(withJSONObject: records).write(to: URL(fileURLWithPath: path))
    }

    /// Publishes `chunks` as the next version (signed with `key`, default the workspace's).
    public func publish(_ chunks: KB, key: String? = nil, extra: [String] = []) throws {
        try publish(chunks, keys: [key ?? self.key], extra: extra)
    }

    /// Publishes `chunks` signed by every key file in `keys` (none with `--stage`).
    public func publish(_ chunks: KB, keys: [String], extra: [String] = []) throws {
        let run = try tryPublish(chunks, keys: keys, extra: extra)
        guard run.status == 0 else { throw StepFailed("publish: \(run.error)") }
    }

    /// `cairn-server publish` of `chunks` with `keys`, whatever its outcome.
    public func tryPublish(_ chunks: KB, keys: [String], extra: [String] = [],
                           channel: String = "field") throws -> (status: Int32, output: String, error: String) {
        let source = folder + "/kb-\(UUID().uuidString).json"
        try Self.knowledgeBase(chunks, to: source)
        return try Binaries.run("cairn-server", ["publish", "--repo", repo, "--channel", channel, "--source", source,
                                                 "--model-dir", model, "--no-cache"] + keys.flatMap { ["--key", $0] } + extra,
                                in: folder)
    }

    /// `cairn-server <arguments>` in the workspace, which must succeed; its standard output.
    @discardableResult
    public func server(_ arguments: [String]) throws -> String {
        let run = try Binaries.run("cairn-server", arguments, in: folder)
        guard run.status == 0 else { throw StepFailed("cairn-server \(arguments.prefix(2).joined(separator: " ")): \(run.error)") }
        return run.output
    }

    /// A new key pair `<folder>/<name>.key` and `.pub` (a "machine" is a folder); returns the
    /// private key's path (the public one is the same with `.pub`).
    public func keygen(_ name: String, in folder: String? = nil) throws -> String {
        let dir = folder ?? self.folder + "/keys"
        try server(["keygen", "--out", dir, "--name", name])
        return dir + "/\(name).key"
    }

    /// The current manifest's snapshot and delta blob hashes and sizes.
    public func blobs() throws -> (snapshot: String, snapshotSize: Int, deltas: [String]) {
        let data = try Data(contentsOf: URL(fileURLWithPath: manifestPath))
        let manifest = (try JSONSerialization.jsonObject(with: data) as! [String: Any])["manifest"] as! [String: Any]
        let snapshot = manifest["snapshot"] as! [String: Any]
        let deltas = (manifest["deltas"] as! [[String: Any]]).map { $0["sha256"] as! String }
        return (snapshot["sha256"] as! String, snapshot["size"] as! Int, deltas)
    }

    /// Starts `cairn-server serve --port 0` (or `port`, plus `arguments`) and returns it with its
    /// URL and log path. `wrapper` starts it through another program, which execs it.
    public func serve(port: Int = 0, arguments: [String] = [], wrapper: [String] = []) async throws -> (Process, url: String, log: String) {
        let server = folder + "/server"
        try FileManager.default.createDirectory(atPath: server, withIntermediateDirectories: true)
        let log = server + "/daemon.log"
        try? FileManager.default.removeItem(atPath: log)
        let process = try launch(Products.path("cairn-server"), ["serve", "--repo", repo, "--port", String(port)] + arguments,
                                 logDirectory: server, through: wrapper)
        var url = ""
        try await waitUntil("cairn-server prints its address", seconds: 30) {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            guard let range = text.range(of: #"http://127\.0\.0\.1:[0-9]+"#, options: .regularExpression) else { return false }
            url = String(text[range])
            return true
        }
        return (process, url, log)
    }
}

/// A running `cairnd` (channel `field`, trusting the workspace's key) and `cairn` calls against
/// its socket. `config` adds lines to a config file (`idle_timeout`, `backoff_min`…). Requested
/// syncs are not limited unless `config` names `sync_request_interval` (or `trust` names a
/// config file of the test's own): tests ask for many in a row, and the default allowance (five
/// at once, then one per 10 s) would only slow them.
public final class DeviceProcess: @unchecked Sendable {
    // @unchecked: every stored property is a constant; Process is only read (pid, isRunning).
    public let socket: String
    public let process: Process
    public let folder: String
    public let dataDirectory: String
    public var log: String { (try? String(contentsOfFile: folder + "/daemon.log", encoding: .utf8)) ?? "" }

    /// `trust` replaces `--trusted-key <workspace key>` (e.g. `["--trusted-root", file]`).
    /// `environment` adds variables to cairnd's (e.g. `NOTIFY_SOCKET`). `wrapper` starts cairnd
    /// through another program (its path and arguments; cairnd's path and arguments follow).
    public init(_ workspace: Workspace, sources: [String], name: String = "device", config: [String: String] = [:],
                dataDirectory: String? = nil, pollInterval: Int = 3600, trust: [String]? = nil,
                environment: [String: String] = [:], wrapper: [String] = []) throws {
        folder = workspace.folder + "/" + name
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        socket = folder + "/cairnd.sock"
        self.dataDirectory = dataDirectory ?? folder + "/data"
        var arguments = sources.flatMap { ["--source", $0] } + [
            "--channel", "field"] + (trust ?? ["--trusted-key", workspace.publicKey]) + ["--data-dir", self.dataDirectory,
            "--socket", socket, "--poll-interval", String(pollInterval)]
        // The test's lines first: a test may name the line a setting is on. A test that hands
        // cairnd a config file of its own (in `trust`) keeps it, and the default allowance.
        if !arguments.contains("--config") {
            let lines = config.map { "\($0.key) = \($0.value)" } + (config["sync_request_interval"] == nil ? ["sync_request_interval = 0"] : [])
            let file = folder + "/cairnd.conf"
            try lines.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
            arguments += ["--config", file]
        }
        process = try launch(Products.path("cairnd"), arguments, logDirectory: folder, environment: childEnvironment(environment),
                             through: wrapper)
    }

    public func cairn(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
        try Binaries.run("cairn", ["--socket", socket] + arguments, in: folder)
    }

    /// `cairn status --json`, or empty when the daemon does not answer.
    public func status() -> [String: Any] {
        guard let run = try? cairn(["status", "--json"]), run.status == 0 else { return [:] }
        return (try? JSONSerialization.jsonObject(with: Data(run.output.utf8))) as? [String: Any] ?? [:]
    }

    public var syncStatus: [String: Any] { status()["sync"] as? [String: Any] ?? [:] }

    /// `DIR/state.json` (protocol/data-directory.md), empty when absent.
    public var state: [String: Any] {
        guard let data = FileManager.default.contents(atPath: dataDirectory + "/state.json") else { return [:] }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }

    /// The stable code of the last sync error, from status (state.json may not hold an
    /// attempt's routine changes yet: protocol/data-directory.md, "state.json").
    public var lastErrorCode: String? { syncStatus["last_error_code"] as? String }

    /// The sync attempts ended since cairnd started (status), 0 when it does not answer.
    public var attemptsFinished: Int { syncStatus["attempts_finished"] as? Int ?? 0 }

    public func waitForVersion(_ version: Int, seconds: Double = 60) async throws {
        try await waitUntil("cairnd serves version \(version)", seconds: seconds) { status()["version"] as? Int == version }
    }

    /// A query over the socket (`cairn query --json`): the version the answer names, its chunk ids.
    public func query(_ text: String, k: Int = 4, mode: String = "hybrid") throws -> (version: Int, ids: [String], online: Bool) {
        let run = try cairn(["query", text, "-k", String(k), "--mode", mode, "--json"])
        guard run.status == 0 else { throw StepFailed("cairn query: \(run.error)") }
        let answer = try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as! [String: Any]
        let ids = (answer["results"] as! [[String: Any]]).map { ($0["chunk"] as! [String: Any])["id"] as! String }
        return (answer["version"] as! Int, ids, answer["online"] as? Bool ?? false)
    }

    public func stop() { stopProcess(process) }

    /// A test that failed before its `stop` leaves no cairnd behind.
    deinit { stopProcess(process) }
}
