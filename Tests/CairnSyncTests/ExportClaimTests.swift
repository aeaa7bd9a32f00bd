import CairnTestSupport
import Foundation
import CairnCore
import CairnStore
import Logging
import Testing
@testable import CairnSync

/// Two channels' exports into one folder at once (each syncer exports on its own): the second
/// would find the folder empty too, and one's clean-up would remove the other's files. The first
/// export is represented by its claim on the folder, held by the test: an export cannot be
/// paused half-way here to race another for real.
@Suite("One export per folder at a time")
struct ExportClaimTests {
    @Test("Given an export writing into a folder, then another export into that folder, however its path is spelled, is refused with export_target_not_empty before it writes; once the first ends, it proceeds; run again, it is refused saying which version the folder holds")
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
        // Run again: refused, saying what the folder holds (until 2026-12-07 "is not empty" alone,
        // whose obvious remedy, removing it, may put an older version in a newer one's place).
        await #expect {
            _ = try await device.syncer.export(to: target)
        } throws: { error in
            let failure = error as? SyncError
            return failure?.code == .exportTargetNotEmpty
                && failure?.message.contains("it holds an export of channel \(repo.channel), version 1, the version this device has") == true
        }
    }

    @Test("Given a model file changed on the device's disk since its install, when exporting, then hash_mismatch naming the file, and nothing is left in the folder")
    func damagedModelFileNotExported() async throws {
        let (repo, device) = try await DeltaTrustTests.deviceOnVersion1(withModel: true)
        let model = try #require(device.directory.installed()?.modelDirectory)
        let file = try #require(repo.modelFiles.first)
        var bytes = try FileSystem.read(model + "/" + file.name)
        bytes[bytes.count / 2] ^= 0xFF
        chmod(model + "/" + file.name, 0o644)
        try FileSystem.writeAtomically(bytes, to: model + "/" + file.name)
        let target = try TemporaryDirectory.make() + "/usb"
        await #expect {
            _ = try await device.syncer.export(to: target)
        } throws: { error in
            let failure = error as? SyncError
            return failure?.code == .hashMismatch && failure?.message.contains("model file \(file.name)") == true
        }
        #expect(!FileManager.default.fileExists(atPath: target))
    }
}

/// An export stopped because cairnd is stopping (`Stopping`, set by SIGTERM). The process-wide
/// flag would stop every test's export in this process: the exporter's own `stopping` stands in
/// for it, true from its n-th question on, so that each step the export asks at is reached.
@Suite("An export stops when cairnd stops")
struct ExportStoppingTests {
    @Test("Given an export asked to stop at each of its steps in turn (the kept blob's check, or the rebuild and compression of a version installed by a delta; before the snapshot's copy, during it, between model files, within and before each read-back), then it ends with cancelled and leaves no folder; never asked to stop, it completes",
          arguments: [false, true])
    func stopsAtEachStep(byDelta: Bool) async throws {
        let repo = try RepoFixture()
        try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        if byDelta {
            // No snapshot blob kept: the export rebuilds it (minutes at a million rows).
            try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), deltasFrom: [1])
            #expect(await device.syncer.syncOnce().installedVersion == 2)
            #expect(!FileManager.default.fileExists(atPath: device.path + "/versions/2/snapshot.blob"))
        }
        let folder = try TemporaryDirectory.make()
        var asked = 0
        var completed: String?
        // The rebuilt blob's size at each question (nil: absent): asked while it is still empty,
        // the question came from within the compression (a level-9 pass over gigabytes).
        let rebuilt = device.directory.stagingPath + "/export-2.sqlite.blob"
        let sizes = Sizes()
        for stopAt in 1...60 {
            let target = folder + "/usb-\(stopAt)"
            let questions = Counter()
            var exporter = Exporter(directory: device.directory, trustedKeys: [repo.key.publicKey], pinnedRoot: nil,
                                    freeSpaceMargin: 0, logger: Logger(label: "cairn.sync.test"))
            sizes.values = []
            exporter.stopping = {
                sizes.add(rebuilt)
                return questions.next() >= stopAt
            }
            do {
                _ = try exporter.export(to: target)
                (asked, completed) = (questions.count, target)
                break
            } catch {
                #expect(error.code == .cancelled && error.message.contains("cairnd is stopping"), "\(error)")
                #expect(!FileManager.default.fileExists(atPath: target), "stopped at question \(stopAt)")
            }
        }
        // The export asked at least at the snapshot's copy, each model file and each read-back.
        #expect(asked >= 4, "\(asked) questions")
        if byDelta { #expect(sizes.values.contains(0), "\(sizes.values)") }
        let whole = try #require(completed, "the export never completed")
        #expect(FileManager.default.fileExists(atPath: whole + "/channels/\(repo.channel)/manifest.json"))
    }

    @Test("Given an export, then its manifests are written only once every file they name has been read back from the disk: a kill or a pulled stick during that read-back leaves a folder no device syncs from")
    func manifestsAfterTheReadBack() async throws {
        let (repo, device) = try await DeltaTrustTests.deviceOnVersion1()
        let target = try TemporaryDirectory.make() + "/usb"
        let manifest = target + "/channels/\(repo.channel)/manifest.json"
        let seen = Seen()
        var exporter = Exporter(directory: device.directory, trustedKeys: [repo.key.publicKey], pinnedRoot: nil,
                                freeSpaceMargin: 0, logger: Logger(label: "cairn.sync.test"))
        // Asked before and during each file's read-back, among the export's other steps.
        exporter.stopping = { seen.add(FileManager.default.fileExists(atPath: manifest)); return false }
        let result = try exporter.export(to: target)
        // The questions one manifest's read-back asks, counted on the written file.
        let perManifest = Counter()
        try ExportReadBack.check([(manifest, try FileSystem.sha256(of: manifest).id)], in: target, stopping: { _ = perManifest.next() })
        // Once the manifest is there, only the two manifests' own read-backs ask. Before
        // 2026-12-06 both were written before any file was read back, so the blobs' asked too.
        let asked = seen.values.drop { !$0 }
        #expect(asked.allSatisfy { $0 } && asked.count == 2 * perManifest.count, "\(seen.values) for \(result.files) files")
    }

    @Test("Given an export, and then a rollback, then while each runs the syncer's progress names it (status's sync.operation) and its start, and once it ends, none")
    func operationShown() async throws {
        let box = ProgressBox()
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url], onInstalled: { _, _ in box.record() })
        box.progress = device.syncer.progress
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2))
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        #expect(box.seen == [nil, nil], "\(box.seen)")
        box.seen = []
        // Asked between the export's steps, as SIGTERM would be.
        _ = try await device.syncer.export(to: try TemporaryDirectory.make() + "/usb", stopping: { box.record(); return false })
        #expect(!box.seen.isEmpty && box.seen.allSatisfy { $0 == .export }, "\(box.seen)")
        #expect(device.syncer.progress.reading().operation == nil)
        box.seen = []
        // The rollback hands version 1 to the query path (onInstalled) while it holds the syncer.
        _ = try await device.syncer.rollback()
        #expect(box.seen == [.rollback], "\(box.seen)")
        #expect(device.syncer.progress.reading().operation == nil)
    }

    final class ProgressBox: @unchecked Sendable {
        // @unchecked: set before the syncer runs, then recorded from the one task or thread
        // that runs the export or rollback at a time.
        var progress: SyncProgress?
        var seen: [SyncProgress.Operation?] = []
        func record() {
            let reading = progress?.reading()
            seen.append(reading?.operation)
            if reading?.operation != nil { #expect(reading?.operationStarted != nil) }
        }
    }

    final class Sizes: @unchecked Sendable {
        // @unchecked: set between exports, added to from the one thread an export runs on.
        var values: [Int64?] = []
        func add(_ path: String) {
            var info = stat()
            values.append(stat(path, &info) == 0 ? Int64(info.st_size) : nil)
        }
    }

    final class Seen: @unchecked Sendable {
        // @unchecked: asked from the one thread the export runs on.
        private(set) var values: [Bool] = []
        func add(_ value: Bool) { values.append(value) }
    }

    final class Counter: @unchecked Sendable {
        // @unchecked: asked from the one thread the export runs on.
        private(set) var count = 0
        func next() -> Int { count += 1; return count }
    }
}

@Suite("An export carries only what its trust accepts")
struct ExportTrustTests {
    @Test("Given a device pinned to keys whose installed version's key was taken out of trusted_key, when it exports, then export_untrusted before anything is written; with that key pinned again, the export is written")
    func versionNoKeyAccepts() async throws {
        let repo = try RepoFixture(withModel: false)
        let old = PublisherKey.generate()
        try repo.publish(version: 1, signer: old)
        var device: Device? = try Device(repo: repo, sources: [repo.url], keys: [old.publicKey])
        #expect(await device!.syncer.syncOnce().installedVersion == 1)
        let path = device!.path
        device = nil
        var pinned: Device? = try Device(repo: repo, sources: [repo.url], keys: [repo.key.publicKey], path: path)
        let target = try TemporaryDirectory.make() + "/usb"
        await #expect {
            _ = try await pinned!.syncer.export(to: target)
        } throws: { error in
            (error as? SyncError)?.code == .exportUntrusted && (error as? SyncError)?.message.contains("trusted_key") == true
        }
        #expect(!FileManager.default.fileExists(atPath: target))
        pinned = nil
        let again = try Device(repo: repo, sources: [repo.url], keys: [old.publicKey], path: path)
        _ = try await again.syncer.export(to: target)
        #expect(FileManager.default.fileExists(atPath: target + "/channels/\(repo.channel)/manifest.json"))
    }
}

@Suite("An export cut short is replaced by the next")
struct ExportCutShortTests {
    @Test("Given a folder an export cut short left (its marker, a half-written blob, a manifest folder), when exporting there, then it is replaced and the export is whole, without the marker; a folder with the same files but no marker, or with the marker and a file no export writes, is refused as not empty and kept; an ext4 stick's root, with only lost+found, takes the export, and a FAT stick's root with Windows' folders, a desktop's trash and macOS's files takes it in place of one cut short")
    func cutShortReplaced() async throws {
        let (repo, device) = try await DeltaTrustTests.deviceOnVersion1()
        let folder = try TemporaryDirectory.make()
        func leftovers(in target: String, marker: Bool) throws {
            try FileManager.default.createDirectory(atPath: target + "/blobs/sha256/ab", withIntermediateDirectories: true)
            try Data("half".utf8).write(to: URL(fileURLWithPath: target + "/blobs/sha256/ab/.tmp-1"))
            try FileManager.default.createDirectory(atPath: target + "/channels/\(repo.channel)", withIntermediateDirectories: true)
            if marker { try Data().write(to: URL(fileURLWithPath: target + "/" + Exporter.unfinishedMarker)) }
        }
        let cut = folder + "/cut"
        try leftovers(in: cut, marker: true)
        _ = try await device.syncer.export(to: cut)
        #expect(FileManager.default.fileExists(atPath: cut + "/channels/\(repo.channel)/manifest.json"))
        #expect(!FileManager.default.fileExists(atPath: cut + "/" + Exporter.unfinishedMarker))
        #expect(!FileManager.default.fileExists(atPath: cut + "/blobs/sha256/ab/.tmp-1"))
        let foreign = folder + "/foreign"
        try leftovers(in: foreign, marker: false)
        await #expect { _ = try await device.syncer.export(to: foreign) } throws: { ($0 as? SyncError)?.code == .exportTargetNotEmpty }
        #expect(FileManager.default.fileExists(atPath: foreign + "/blobs/sha256/ab/.tmp-1"))
        // Files someone put beside an export cut short (documents copied onto the stick since)
        // are not the export's to remove: refused, all kept (before 2026-12-06 every entry went).
        let shared = folder + "/shared"
        try leftovers(in: shared, marker: true)
        try Data("mine".utf8).write(to: URL(fileURLWithPath: shared + "/notes.txt"))
        await #expect { _ = try await device.syncer.export(to: shared) } throws: {
            ($0 as? SyncError)?.code == .exportTargetNotEmpty && ($0 as? SyncError)?.message.contains("notes.txt") == true
        }
        #expect(FileManager.default.fileExists(atPath: shared + "/notes.txt") && FileManager.default.fileExists(atPath: shared + "/blobs/sha256/ab/.tmp-1"))
        // An ext4 stick's root: its lost+found is no one's files, and stays.
        let stick = folder + "/ext4-root"
        try FileManager.default.createDirectory(atPath: stick + "/lost+found", withIntermediateDirectories: true)
        _ = try await device.syncer.export(to: stick)
        #expect(FileManager.default.fileExists(atPath: stick + "/channels/\(repo.channel)/manifest.json"))
        #expect(FileManager.default.fileExists(atPath: stick + "/lost+found"))
        // A stick Windows mounted: its own folders at the root are no one's files either, also
        // beside an export cut short, which is then replaced.
        let windows = folder + "/fat-root"
        try leftovers(in: windows, marker: true)
        // A Linux desktop's trash too (the old export, deleted from the stick in a file manager,
        // lands in .Trash-1000) and macOS's AppleDouble files on FAT: until 2026-12-07 "not empty".
        let others = ["System Volume Information", "$RECYCLE.BIN", ".Trash-1000", "._.Trashes", ".TemporaryItems"]
        for name in others {
            try FileManager.default.createDirectory(atPath: windows + "/" + name, withIntermediateDirectories: true)
        }
        _ = try await device.syncer.export(to: windows)
        #expect(FileManager.default.fileExists(atPath: windows + "/channels/\(repo.channel)/manifest.json"))
        #expect(others.allSatisfy { FileManager.default.fileExists(atPath: windows + "/" + $0) })
    }

    @Test("Given a folder whose export marker an export in another process holds (it is writing there now), when exporting there, then it is refused with export_target_not_empty and nothing of the folder is removed; once that export is gone (its lock released, the marker left), the folder is an export cut short and is replaced")
    func liveExportInAnotherProcess() async throws {
        let (repo, device) = try await DeltaTrustTests.deviceOnVersion1()
        let target = try TemporaryDirectory.make() + "/usb"
        try FileManager.default.createDirectory(atPath: target + "/blobs/sha256/ab", withIntermediateDirectories: true)
        try Data("half".utf8).write(to: URL(fileURLWithPath: target + "/blobs/sha256/ab/.tmp-1"))
        // The other process's export: its marker, locked as an export holds it. flock locks an
        // open file, not a process, so a descriptor of the test's own stands in for the other
        // cairnd (one cannot be paused half-way through an export here).
        let marker = target + "/" + Exporter.unfinishedMarker
        let other = open(marker, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        try #require(other >= 0)
        var held = true
        defer { if held { close(other) } }
        try #require(flock(other, LOCK_EX | LOCK_NB) == 0)
        await #expect {
            _ = try await device.syncer.export(to: target)
        } throws: { error in
            let failure = error as? SyncError
            return failure?.code == .exportTargetNotEmpty && failure?.message.contains("another export is writing into") == true
        }
        #expect(FileManager.default.fileExists(atPath: target + "/blobs/sha256/ab/.tmp-1") && FileManager.default.fileExists(atPath: marker))
        close(other)
        held = false
        _ = try await device.syncer.export(to: target)
        #expect(FileManager.default.fileExists(atPath: target + "/channels/\(repo.channel)/manifest.json"))
        #expect(!FileManager.default.fileExists(atPath: marker) && !FileManager.default.fileExists(atPath: target + "/blobs/sha256/ab/.tmp-1"))
    }
}
