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
}
