import CairnTestSupport
import Foundation
import Testing

/// Where a new version's model comes from (the "now serving" line's `cairn.model`): on a fresh
/// device it loads while the install downloads and checks the index, so the first answer does
/// not wait for it; a later version with the same model reuses the serving one. Real cairnd
/// against the fault server (no faults).
@Suite("The new version's model: loaded during the install, then reused (real processes)", .offCooperativePool)
struct ModelLoadTests {
    /// The "now serving" line of `version` in the rig's cairnd log.
    static func servingLine(_ rig: Rig, _ version: Int) -> Substring? {
        rig.device.log.split(separator: "\n").first { $0.contains("cairn.version=\(version) ") && $0.contains("now serving") }
    }

    @Test("Given a fresh device, when version 1 installs, then its model was loaded during the install; when version 2 with the same model installs, then the model is reused")
    func preloadedThenReused() async throws {
        let rig = try await Rig()
        defer { rig.stop() }
        let serving = { (version: Int) in Self.servingLine(rig, version) }
        let first = try #require(serving(1), "\(rig.device.log)")
        #expect(first.contains("cairn.model=preloaded"), "\(first)")
        let version = try rig.publishNext()
        #expect(try await ProgressTests.syncWait(rig).status == 0)
        #expect(rig.wrongAnswer(expecting: version) == nil)
        let second = try #require(serving(version), "\(rig.device.log)")
        #expect(second.contains("cairn.model=reused"), "\(second)")
    }

    @Test("Given the serving model's files damaged on the device's disk (its weights' header, in place), when the next version, with a canary, is synced, then the attempt fails io naming the damage, the next attempt downloads the model again, and the new version's model is loaded from the new files, not reused from the damaged ones cairnd still maps")
    func damagedModelLoadedAgain() async throws {
        let rig = try await Rig()
        defer { rig.stop() }
        let models = rig.device.dataDirectory + "/models"
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: models).first)
        let weights = try #require(FileHandle(forWritingAtPath: models + "/\(name)/model.safetensors"))
        try weights.write(contentsOf: Data(repeating: 0xFF, count: 8))  // the header's length: no model reads
        try weights.close()
        let canaries = rig.workspace.folder + "/canaries.json"
        try #"[{"query": "how do I make water safe to drink", "expect": ["boil"], "k": 3, "mode": "hybrid"}]"#
            .write(toFile: canaries, atomically: true, encoding: .utf8)
        let version = try rig.publishNext(extra: ["--canaries", canaries])
        #expect(try await ProgressTests.syncWait(rig).status != 0)
        let said = rig.device.syncStatus["last_error"] as? String ?? ""
        #expect(rig.device.lastErrorCode == "io" && said.contains("signed SHA-256"), "\(said)")
        let weightsBlob = try #require(rig.currentManifest().model.files.first { $0.name == "model.safetensors" }).sha256.hex
        let seen = rig.server.requests.count
        #expect(try await ProgressTests.syncWait(rig).status == 0)
        // The weights were downloaded again (the server logs a request before its last byte).
        #expect(rig.server.requests.dropFirst(seen).contains { $0.path.contains(weightsBlob) && $0.status == 200 },
                "\(rig.server.requests.dropFirst(seen).map(\.path))")
        #expect(rig.wrongAnswer(expecting: version) == nil)
        let line = Self.servingLine(rig, version)
        #expect(line?.contains("cairn.model=reused") == false && line?.contains("cairn.model=none") == false, "\(String(describing: line))")
        // (The tests' tiny model ranks at random: that dense search answers is what counts.)
        let dense = try rig.device.query("how do I make water safe to drink", mode: "dense")
        #expect(dense.version == version && !dense.ids.isEmpty && rig.device.status()["model_loaded"] as? Bool == true, "\(dense)")
    }
}
