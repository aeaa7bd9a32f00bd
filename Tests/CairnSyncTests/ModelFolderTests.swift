import CairnTestSupport
import CairnCore
import CairnStore
import CairnSync
import Foundation
import Testing

@Suite("Model folders: one per set of model files")
struct ModelFolderTests {
    /// Where `versions/<version>/model` points, relative to the data directory.
    static func modelTarget(_ device: Device, _ version: Int) -> String? {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: device.path + "/versions/\(version)/model"))
            .map { ($0 as NSString).lastPathComponent }
    }

    @Test("Given a folder named for the weights alone (as devices had them), then a version with the same files uses it without downloading; a version whose vocabulary changes with the same weights gets a folder of its own holding its vocabulary; weights cut short on the device are downloaded again")
    func vocabularyChangeGetsItsOwnFolder() async throws {
        let repo = try RepoFixture()
        let first = try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        let name = try #require(first.model.folderName)
        #expect(Self.modelTarget(device, 1) == name)

        // The layout before 2026-12-05: the folder named by the weights' SHA-256.
        let weights = try #require(first.model.files.first { $0.name == "model.safetensors" }).sha256.hex
        #expect(rename(device.path + "/models/" + name, device.path + "/models/" + weights) == 0)
        unlink(device.path + "/versions/1/model")
        #expect(symlink("../../models/" + weights, device.path + "/versions/1/model") == 0)
        try repo.publish(version: 2, deltasFrom: [1])
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        #expect(Self.modelTarget(device, 2) == weights)
        #expect(device.entries("models") == [weights])

        // The same weights, another vocabulary (two tokens swapped).
        let vocabulary = try String(contentsOfFile: device.path + "/models/\(weights)/vocab.txt", encoding: .utf8)
        var lines = vocabulary.split(separator: "\n", omittingEmptySubsequences: false)
        lines.swapAt(lines.count - 2, lines.count - 3)
        let changed = Array(lines.joined(separator: "\n").utf8)
        let changedID = try repo.blobs.put(changed)
        let third = try repo.publish(version: 3, deltasFrom: [2]) { manifest in
            manifest.model.files = manifest.model.files.map {
                $0.name == "vocab.txt" ? Manifest.ModelFile(name: "vocab.txt", sha256: changedID, size: changed.count) : $0
            }
        }
        #expect(await device.syncer.syncOnce().installedVersion == 3)
        let newName = try #require(third.model.folderName)
        #expect(newName != name && Self.modelTarget(device, 3) == newName)
        #expect(try FileSystem.read(device.path + "/models/\(newName)/vocab.txt") == changed)
        // Version 2 (previous) keeps the folder it uses.
        #expect(device.entries("models") == [weights, newName].sorted())

        // The weights cut short on the device: the next version downloads the model again.
        let damaged = device.path + "/models/\(newName)/model.safetensors"
        let size = try FileSystem.read(damaged).count
        #expect(truncate(damaged, off_t(size / 2)) == 0)
        try repo.publish(version: 4, deltasFrom: [3]) { manifest in manifest.model.files = third.model.files }
        #expect(await device.syncer.syncOnce().installedVersion == 4)
        #expect(try FileSystem.read(damaged).count == size)
    }
}
