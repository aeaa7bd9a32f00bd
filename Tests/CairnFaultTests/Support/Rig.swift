import CairnCore
import CairnTestSupport
import Foundation

/// One device under fault: a publisher workspace, the fault server in front of its repository,
/// and a real cairnd syncing from it. Each version `n` holds three shared chunks and one
/// `release-n` chunk ("release notes edition n"), so an answer shows which version served it.
final class Rig: @unchecked Sendable {
    // @unchecked: used from one test task at a time; `version` changes only in `publishNext`.
    let workspace: Workspace
    let server: FaultServer
    let device: DeviceProcess
    private(set) var version = 1

    static func knowledgeBase(_ version: Int) -> Workspace.KB {
        [("boil", "Boil the water for one minute before you drink it."),
         ("maps", "The flood maps show the safe routes to higher ground."),
         ("radio", "A crank radio keeps working when the power is out."),
         ("release-\(version)", "Release notes for edition \(version) of the field guide.")]
    }

    /// The root key of a rig made `rootPinned` (`keys/root.key`).
    var rootKey: String { workspace.folder + "/keys/root.key" }

    /// Publishes version 1, starts the fault server and cairnd (`config` adds cairnd config
    /// lines), and waits until version 1 serves. `rootPinned`: the repository gets root 1 (root
    /// key `rootKey`, the workspace's key signs) and the device is pinned to it, not to the key.
    /// `wrapper` starts cairnd through another program, `environment` adds to its variables
    /// (`DeviceProcess`'s).
    init(name: String = "device", config: [String: String] = [:], dataDirectory: String? = nil,
         workspace: Workspace? = nil, rootPinned: Bool = false, wrapper: [String] = [],
         environment: [String: String] = [:]) async throws {
        self.workspace = try workspace ?? Workspace()
        var trust: [String]?
        if rootPinned {
            let root = try self.workspace.keygen("root")
            try self.workspace.server(["root", "init", "--repo", self.workspace.repo, "--root-key", root,
                                       "--signing-key", self.workspace.publicKey])
            trust = ["--trusted-root", self.workspace.repo + "/root/1.root.json"]
        }
        try self.workspace.publish(Self.knowledgeBase(1))
        server = try FaultServer(root: self.workspace.repo)
        do {
            device = try DeviceProcess(self.workspace, sources: [server.url], name: name, config: config,
                                       dataDirectory: dataDirectory, trust: trust, environment: environment, wrapper: wrapper)
        } catch {
            server.stop()
            throw error
        }
        // A device that never serves must not outlive the test that waited for it.
        do { try await device.waitForVersion(1) } catch {
            stop()
            throw error
        }
    }

    func stop() {
        device.stop()
        server.stop()
    }

    /// Publishes the next version (not yet synced) and returns its number. `bulk` adds a chunk
    /// of that many bytes of random words (incompressible, so its blobs span many pages), new
    /// in each version; `adding`, chunks as they are.
    @discardableResult
    func publishNext(key: String? = nil, extra: [String] = [], bulk: Int = 0, adding: Workspace.KB = []) throws -> Int {
        var chunks = Self.knowledgeBase(version + 1) + adding
        if bulk > 0 { chunks.append(("bulk", Self.randomWords(bytes: bulk))) }
        try workspace.publish(chunks, key: key, extra: extra)
        version += 1
        return version
    }

    /// About `bytes` bytes of random hexadecimal words.
    static func randomWords(bytes: Int) -> String {
        (0..<bytes / 9).map { _ in String(UInt32.random(in: .min ... .max), radix: 16) }.joined(separator: " ")
    }

    /// nil when the device answers from `version` with exactly that version's release chunk;
    /// else what it answered.
    func wrongAnswer(expecting version: Int) -> String? {
        do {
            let answer = try device.query("release notes edition", mode: "lexical")
            if answer.version == version && answer.ids == ["release-\(version)"] { return nil }
            return "expected version \(version) answering release-\(version), got version \(answer.version) with \(answer.ids)"
        } catch {
            return "query failed: \(error)"
        }
    }

    /// cairnd's one log line per refused attempt ("sync refused: <code>: <message>") and per
    /// install that reached the query path ("now serving", logged after the new index is
    /// loaded, which "installed version" precedes). The log, not state.json, marks the end of
    /// an attempt: on a full or read-only disk state.json cannot be written (the status then
    /// answers from memory).
    var outcomeLines: (refused: [Substring], installed: Int) {
        let lines = device.log.split(separator: "\n")
        return (lines.filter { $0.contains("sync refused: ") }, lines.filter { $0.contains("now serving") }.count)
    }

    /// Asks for a sync and waits until that attempt ends; returns its error code and message
    /// (from its one-line log line), or nil when the attempt succeeded.
    func syncAttempt(during: (() -> Void)? = nil) async throws -> (code: String, message: String)? {
        let before = outcomeLines, finished = device.syncStatus["attempts_finished"] as? Int ?? 0
        let sync = try device.cairn(["sync"])
        guard sync.status == 0 else { throw StepFailed("cairn sync: \(sync.error)") }
        during?()
        // An attempt counts as finished in status once it has ended whole: after its refusal's
        // log line, or after the new version serves ("now serving"). state.json, written before
        // the new version is opened, would end the wait while the old version still answers.
        try await waitUntil("a sync attempt ends", seconds: 90) {
            (device.syncStatus["attempts_finished"] as? Int ?? 0) > finished
        }
        // The first refusal after the request is this attempt's: a refused attempt is retried
        // after the back-off (backoff_min, 30 s unless a test sets less), and on a loaded
        // machine that retry may have ended too by now, with another reason (a disk still full refused before any
        // download), which the status's last_error would then give.
        let after = outcomeLines
        guard after.refused.count > before.refused.count, let range = after.refused[before.refused.count].range(of: "sync refused: ")
        else { return nil }
        let line = after.refused[before.refused.count]
        let refusal = line[range.upperBound...]
        let code = refusal.prefix { $0 != ":" }
        let message = refusal.dropFirst(code.count).drop { $0 == ":" || $0 == " " }
        return (String(code), String(message))
    }

    /// The common invariant of a refused or failed attempt at `version`: the error code is one
    /// of `codes`, the status gives one line, the old version keeps answering, nothing newer is
    /// installed. nil when all of that holds.
    func refusal(_ outcome: (code: String, message: String)?, codes: Set<String>, old: Int) -> String? {
        guard let outcome else { return "the attempt succeeded" }
        if !codes.contains(outcome.code) { return "error \(outcome.code): \(outcome.message)" }
        if outcome.message.isEmpty || outcome.message.contains("\n") { return "status last_error is not one line: \(outcome.message)" }
        if let wrong = wrongAnswer(expecting: old) { return wrong }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: device.dataDirectory + "/versions")) ?? []
        if let extra = versions.first(where: { (Int($0) ?? 0) > old }) { return "versions/\(extra) was left behind" }
        return nil
    }

    /// With the fault gone: the next attempt installs `version` and it answers.
    /// The attempt can count as ended once state.json records it without an error, which the
    /// install writes before the new index is loaded for queries ("now serving"): the answer
    /// is awaited (at most 30 s) instead of read at that instant.
    func recovery(to version: Int) async throws -> String? {
        let outcome = try await syncAttempt()
        if let outcome { return "recovery failed: \(outcome.code): \(outcome.message)" }
        try? await waitUntil("version \(version) answers", seconds: 30) { wrongAnswer(expecting: version) == nil }
        return wrongAnswer(expecting: version)
    }

    /// The current manifest's snapshot and delta blobs and sizes (from the repository).
    func currentBlobs() throws -> [(sha: String, size: Int)] {
        let data = try Data(contentsOf: URL(fileURLWithPath: workspace.manifestPath))
        let manifest = (try JSONSerialization.jsonObject(with: data) as! [String: Any])["manifest"] as! [String: Any]
        let snapshot = manifest["snapshot"] as! [String: Any]
        let deltas = manifest["deltas"] as! [[String: Any]]
        return deltas.map { ($0["sha256"] as! String, $0["size"] as! Int) } + [(snapshot["sha256"] as! String, snapshot["size"] as! Int)]
    }
}

extension Rig {
    /// Re-signs the current manifest with the workspace's own key after `adjust` (a publisher
    /// that signs something wrong: the device must still check what it gets).
    func tamperManifest(_ adjust: (inout Manifest) -> Void) throws {
        let key = try PublisherKey(fileText: String(contentsOfFile: workspace.key, encoding: .utf8))
        var manifest = try currentManifest()
        adjust(&manifest)
        try Data(SignedManifest.encode(manifest, signingKey: key)).write(to: URL(fileURLWithPath: workspace.manifestPath))
    }

    /// The channel's current manifest, checked against the workspace's key.
    func currentManifest() throws -> Manifest { try workspace.currentManifest() }

    /// Puts back the manifest the publisher wrote for `version` (after a tamper or a replay).
    func restoreManifest(_ version: Int) throws {
        let saved = workspace.repo + "/channels/field/versions/\(version).json"
        try? FileManager.default.removeItem(atPath: workspace.manifestPath)
        try FileManager.default.copyItem(atPath: saved, toPath: workspace.manifestPath)
    }
}

extension Workspace {
    /// The manifest the publisher last wrote, verified with its key.
    func currentManifest() throws -> Manifest {
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: manifestPath)))
        let key = try PublisherKey(fileText: String(contentsOfFile: self.key, encoding: .utf8))
        return try SignedManifest.decodeAndVerify(bytes, trustedKeys: [key.publicKey])
    }
}
