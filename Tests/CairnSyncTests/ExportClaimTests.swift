import CairnTestSupport
import Foundation
import Testing
@testable import CairnSync

/// Two channels' exports into one folder at once (each syncer exports on its own): the second
/// would find the folder empty too, and one's clean-up would remove the other's files. The first
/// export is represented by its claim on the folder, held by the test: an export cannot be
/// paused half-way here to race another for real.
@Suite("One export per folder at a time")
struct ExportClaimTests {
    @Test("Given an export writing into a folder, then another export into that folder, however its path is spelled, is refused with export_target_not_empty before it writes; once the first ends, it proceeds")
    func oneExportPerFolder() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        let target = try TemporaryDirectory.make() + "/usb"
        #expect(Exporter.claim(target))
        await #expect {
            _ = try await device.syncer.export(to: target + "/./")
        } throws: { error in
            let failure = error as? SyncError
            return failure?.code == .exportTargetNotEmpty && failure?.message.contains("another export is writing into") == true
        }
        #expect(!FileManager.default.fileExists(atPath: target))
        Exporter.release(target)
        _ = try await device.syncer.export(to: target)
        #expect(FileManager.default.fileExists(atPath: target + "/channels/\(repo.channel)/manifest.json"))
    }
}
