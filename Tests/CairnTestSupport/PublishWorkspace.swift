import Foundation

/// A publisher's folder for process-level tests: the tiny model, a key pair made by
/// `cairn-server keygen`, and `repo/`, into which `publish` writes versions of channel `field`
/// with the real `cairn-server publish`.
public struct PublishWorkspace: Sendable {
    public let folder: String
    public let model: String
    public var repo: String { folder + "/repo" }
    public var key: String { folder + "/keys/publisher.key" }
    public var publicKey: String { folder + "/keys/publisher.pub" }
    public static let channel = "field"

    /// A small knowledge base, each chunk with distinct words.
    public static let version1: [(id: String, text: String)] = [
        ("boil", "Boil the water for one minute before you drink it."),
        ("maps", "The flood maps show the safe routes to higher ground."),
        ("storm", "A storm can bring a flood within hours."),
        ("radio", "A crank radio keeps working when the power is out."),
    ]
    /// Its update: one chunk rewritten, one removed, one added.
    public static let version2: [(id: String, text: String)] = [
        ("boil", "Boil the water for one full minute, three at altitude, before you drink it."),
        ("maps", "The flood maps show the safe routes to higher ground."),
        ("radio", "A crank radio keeps working when the power is out."),
        ("sandbag", "Sandbags stacked in a pyramid hold back shallow flood water."),
    ]

    /// Runs keygen on a thread of its own (never blocking a cooperative thread).
    public static func make() async throws -> PublishWorkspace {
        try await onThread { try PublishWorkspace() }
    }

    public init() throws {
        folder = try TemporaryDirectory.make()
        model = folder + "/model"
        try TinyModel.write(to: model)
        let keygen = try Binaries.run("cairn-server", ["keygen", "--out", folder + "/keys"], in: folder)
        guard keygen.status == 0 else { throw ProcessFailed("keygen: \(keygen.error)") }
    }

    /// `publish(_:)` on a thread of its own (never blocking a cooperative thread).
    public func publish(_ chunks: [(id: String, text: String)]) async throws {
        try await onThread { [self] in try publish(chunks) }
    }

    /// Publishes the next version of channel `field` holding `chunks` (scenario `flood`).
    public func publish(_ chunks: [(id: String, text: String)]) throws {
        let source = folder + "/kb-\(UUID().uuidString).json"
        let records = chunks.map { ["id": $0.id, "title": $0.id, "content": $0.text, "scenario": "flood"] }
        try JSONSerialization.data(withJSONObject: records).write(to: URL(fileURLWithPath: source))
        let run = try Binaries.run("cairn-server", ["publish", "--repo", repo, "--channel", Self.channel, "--source", source,
                                                    "--key", key, "--model-dir", model, "--no-cache"], in: folder)
        guard run.status == 0 else { throw ProcessFailed("publish: \(run.error)") }
    }

    /// The current manifest's snapshot and delta blob hashes.
    public func blobs() throws -> (snapshot: String, deltas: [String]) {
        let data = try Data(contentsOf: URL(fileURLWithPath: repo + "/channels/\(Self.channel)/manifest.json"))
        let manifest = (try JSONSerialization.jsonObject(with: data) as! [String: Any])["manifest"] as! [String: Any]
        let snapshot = (manifest["snapshot"] as! [String: Any])["sha256"] as! String
        let deltas = (manifest["deltas"] as! [[String: Any]]).map { $0["sha256"] as! String }
        return (snapshot, deltas)
    }

    /// Starts `cairn-server serve --port 0` (plus `arguments`) on the repository and returns it
    /// with its URL and log path, once it has printed its address.
    public func serve(_ arguments: [String] = [], name: String = "server") async throws -> (Process, url: String, log: String) {
        let logFolder = folder + "/" + name
        try FileManager.default.createDirectory(atPath: logFolder, withIntermediateDirectories: true)
        let server = try launch(Products.path("cairn-server"), ["serve", "--repo", repo, "--port", "0"] + arguments,
                                logDirectory: logFolder)
        let log = logFolder + "/daemon.log"
        var url = ""
        try await waitUntil("cairn-server prints its address", seconds: 30) {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            guard let range = text.range(of: #"http://127\.0\.0\.1:[0-9]+"#, options: .regularExpression) else { return false }
            url = String(text[range])
            return true
        }
        return (server, url, log)
    }
}

/// A child process the test needs failed (its message says which and why).
public struct ProcessFailed: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
