import CairnTestSupport
import Foundation
import Testing

/// Where a new version's model comes from (the "now serving" line's `cairn.model`): on a fresh
/// device it loads while the install downloads and checks the index, so the first answer does
/// not wait for it; a later version with the same model reuses the serving one. Real cairnd
/// against the fault server (no faults).
@Suite("The new version's model: loaded during the install, then reused (real processes)", .offCooperativePool)
struct ModelLoadTests {
    @Test("Given a fresh device, when version 1 installs, then its model was loaded during the install; when version 2 with the same model installs, then the model is reused")
    func preloadedThenReused() async throws {
        let rig = try await Rig()
        defer { rig.stop() }
        let serving = { (version: Int) in
            rig.device.log.split(separator: "\n").first { $0.contains("cairn.version=\(version) ") && $0.contains("now serving") }
        }
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
        #expect(try await ProgressTests.syncWait(rig).status == 0)
        #expect(rig.wrongAnswer(expecting: version) == nil)
        let line = rig.device.log.split(separator: "\n").first { $0.contains("cairn.version=\(version) ") && $0.contains("now serving") }
        #expect(line?.contains("cairn.model=reused") == false && line?.contains("cairn.model=none") == false, "\(String(describing: line))")
        // (The tests' tiny model ranks at random: that dense search answers is what counts.)
        let dense = try rig.device.query("how do I make water safe to drink", mode: "dense")
        #expect(dense.version == version && !dense.ids.isEmpty && rig.device.status()["model_loaded"] as? Bool == true, "\(dense)")
    }
}
