import CairnTestSupport
import Foundation
import Testing

/// `cairn-server prune` on repositories written by `cairn-server publish`, checked by
/// `verify`, `history` and a device syncing from the pruned folder. Real processes.
@Suite("cairn-server prune (real processes)", .offCooperativePool, .serialized)
struct PruneTests {
    /// Version `n` of a small knowledge base: one chunk changes each time, so each version has
    /// its own snapshot and deltas from the earlier ones.
    static func kb(_ n: Int) -> Workspace.KB {
        [("generator", "Run a generator outside, never in a garage or a basement: its exhaust kills."),
         ("fuel", "Store fuel in approved containers away from the house."),
         ("pump", "Prime the hand pump with a cup of clean water."),
         ("notice", "Notice number \(n): the shelter opens at \(n) o'clock.")]
    }

    /// The blobs `channels/<channel>/versions/<n>.json` names (or `staged/<channel>/<n>.json`).
    static func blobs(_ workspace: Workspace, _ version: Int, channel: String = "field",
                      staged: Bool = false) throws -> (snapshot: String, deltas: [String], model: [String]) {
        let path = workspace.repo + (staged ? "/staged/\(channel)/\(version).json" : "/channels/\(channel)/versions/\(version).json")
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let manifest = try #require((try JSONSerialization.jsonObject(with: data) as? [String: Any])?["manifest"] as? [String: Any])
        let snapshot = try #require((manifest["snapshot"] as? [String: Any])?["sha256"] as? String)
        let deltas = (manifest["deltas"] as? [[String: Any]] ?? []).compactMap { $0["sha256"] as? String }
        let model = ((manifest["model"] as? [String: Any])?["files"] as? [[String: Any]] ?? []).compactMap { $0["sha256"] as? String }
        return (snapshot, deltas, model)
    }

    static func present(_ workspace: Workspace, _ hex: String) -> Bool {
        FileManager.default.fileExists(atPath: workspace.repo + "/blobs/sha256/\(hex.prefix(2))/\(hex)")
    }

    /// Every blob file under `blobs/`, as relative paths.
    static func blobFiles(_ workspace: Workspace) -> Set<String> {
        let root = workspace.repo + "/blobs"
        let names = FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? []
        return Set(names.filter { $0.split(separator: "/").count == 3 })
    }

    @Test("Given four versions, when pruned with --keep 2 (after a --dry-run that removes nothing), then the old snapshots go, the kept versions' blobs and the model stay, verify passes counting two pruned versions, history marks them, a lost current blob is still an error, the next publish needs no pruned base, and a device syncs to the newest version")
    func keepTwo() async throws {
        let workspace = try Workspace()
        for n in 1...4 { try workspace.publish(Self.kb(n)) }
        let old = try (1...2).map { try Self.blobs(workspace, $0) }
        let kept = try (3...4).map { try Self.blobs(workspace, $0) }
        let before = Self.blobFiles(workspace)

        // A dry run says what would go and removes nothing.
        let dry = try Binaries.run("cairn-server", ["prune", "--repo", workspace.repo, "--keep", "2", "--dry-run", "--verbose"], in: workspace.folder)
        #expect(dry.status == 0, "\(dry.error)")
        #expect(dry.output.contains("would remove blobs/sha256/\(old[0].snapshot.prefix(2))/\(old[0].snapshot)"), "\(dry.output)")
        #expect(dry.output.contains("(--dry-run: nothing removed)"))
        #expect(Self.blobFiles(workspace) == before)
        #expect(!FileManager.default.fileExists(atPath: workspace.repo + "/channels/field/.pruned"))

        let run = try Binaries.run("cairn-server", ["prune", "--repo", workspace.repo, "--keep", "2"], in: workspace.folder)
        #expect(run.status == 0, "\(run.error)")
        let lines = run.output.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].hasPrefix("removed ") && lines[0].contains("kept the blobs of field v3–v4"), "\(run.output)")
        for version in old {
            #expect(!Self.present(workspace, version.snapshot))
            for delta in version.deltas { #expect(!Self.present(workspace, delta)) }
        }
        for version in kept {
            for blob in [version.snapshot] + version.deltas + version.model { #expect(Self.present(workspace, blob)) }
        }
        // The manifests stay, every one.
        for n in 1...4 { #expect(FileManager.default.fileExists(atPath: workspace.repo + "/channels/field/versions/\(n).json")) }

        let verify = try Binaries.run("cairn-server", ["verify", workspace.repo, "--trusted-key", workspace.publicKey], in: workspace.folder)
        #expect(verify.status == 0, "\(verify.output)")
        #expect(verify.output.contains("2 version(s) pruned") && verify.output.contains("all good"), "\(verify.output)")
        let history = try Binaries.run("cairn-server", ["history", "--repo", workspace.repo, "--channel", "field"], in: workspace.folder)
        #expect(history.status == 0, "\(history.error)")
        #expect(history.output.split(separator: "\n").filter { $0.hasSuffix("(pruned)") }.count == 2, "\(history.output)")

        // The next publish builds its deltas from the kept versions only, and says nothing of the others.
        let next = try workspace.tryPublish(Self.kb(5), keys: [workspace.key])
        #expect(next.status == 0 && !next.error.contains("no delta from"), "\(next.error)")

        let (server, url, _) = try await workspace.serve()
        defer { stopProcess(server) }
        let device = try DeviceProcess(workspace, sources: [url])
        defer { device.stop() }
        try await device.waitForVersion(5)
        #expect(try device.query("generator garage exhaust").version == 5)

        // A blob the current manifest names is never taken for a pruned one.
        let current = try Self.blobs(workspace, 5)
        try FileManager.default.removeItem(atPath: workspace.repo + "/blobs/sha256/\(current.snapshot.prefix(2))/\(current.snapshot)")
        let lost = try Binaries.run("cairn-server", ["verify", workspace.repo, "--trusted-key", workspace.publicKey], in: workspace.folder)
        #expect(lost.status == 1 && lost.output.contains("field v5"), "\(lost.output)")
    }

    @Test("Given nine versions published with --keep-deltas 7, when pruned without --keep, then only version 1 goes (the current manifest has a delta from version 2) and the next publish with --keep-deltas 7 builds all seven deltas")
    func defaultKeepFollowsTheChannelsDeltas() throws {
        let workspace = try Workspace()
        for n in 1...9 { try workspace.publish(Self.kb(n), extra: ["--keep-deltas", "7"]) }
        let run = try Binaries.run("cairn-server", ["prune", "--repo", workspace.repo], in: workspace.folder)
        #expect(run.status == 0, "\(run.error)")
        #expect(run.output.contains("kept the blobs of field v2–v9"), "\(run.output)")
        #expect(!Self.present(workspace, try Self.blobs(workspace, 1).snapshot))
        #expect(Self.present(workspace, try Self.blobs(workspace, 2).snapshot))
        try workspace.publish(Self.kb(10), extra: ["--keep-deltas", "7"])
        #expect(try Self.blobs(workspace, 10).deltas.count == 7)
    }

    @Test("Given versions 1 to 3 and a version 4 file a killed publish left (manifest.json still names 3), when pruned with --keep 2, then versions 2 and 3 keep their blobs (the one above the current counts for none) and version 1's snapshot goes")
    func leftoverVersionCountsForNone() throws {
        let workspace = try Workspace()
        for n in 1...3 { try workspace.publish(Self.kb(n)) }
        let current = try Data(contentsOf: URL(fileURLWithPath: workspace.manifestPath))
        try workspace.publish(Self.kb(4))
        // Killed between versions/4.json and manifest.json's rename: 3 is still what devices see.
        try current.write(to: URL(fileURLWithPath: workspace.manifestPath))
        let run = try Binaries.run("cairn-server", ["prune", "--repo", workspace.repo, "--keep", "2"], in: workspace.folder)
        #expect(run.status == 0, "\(run.error)")
        // Until 2026-12-07, versions 3 and 4 were the two kept, and version 2 lost its snapshot.
        #expect(Self.present(workspace, try Self.blobs(workspace, 2).snapshot))
        #expect(Self.present(workspace, try Self.blobs(workspace, 3).snapshot))
        #expect(!Self.present(workspace, try Self.blobs(workspace, 1).snapshot))
    }

    @Test("Given a version staged for more signatures, when the channel is pruned to one version, then the staged version's blobs stay and it releases into a repository that verifies")
    func stagedSurvives() throws {
        let workspace = try Workspace()
        for n in 1...2 { try workspace.publish(Self.kb(n)) }
        try workspace.publish(Self.kb(3), extra: ["--stage"])
        let staged = try Self.blobs(workspace, 3, staged: true)
        let run = try Binaries.run("cairn-server", ["prune", "--repo", workspace.repo, "--keep", "1"], in: workspace.folder)
        #expect(run.status == 0, "\(run.error)")
        #expect(!Self.present(workspace, try Self.blobs(workspace, 1).snapshot))
        for blob in [staged.snapshot] + staged.deltas + staged.model { #expect(Self.present(workspace, blob)) }
        try workspace.server(["release", "--repo", workspace.repo, "--channel", "field"])
        let verify = try Binaries.run("cairn-server", ["verify", workspace.repo, "--trusted-key", workspace.publicKey], in: workspace.folder)
        #expect(verify.status == 0, "\(verify.output)")
    }

    @Test("Given a model file that only an old version of field and the current version of tools name, when field is pruned, then the file stays while field's old snapshot goes; a prune of a channel that does not exist is a usage error")
    func sharedAcrossChannels() throws {
        let workspace = try Workspace()
        let older = workspace.folder + "/model-older"
        try TinyModel.write(to: older, seed: 8)
        for channel in ["tools", "field"] {
            let run = try workspace.tryPublish(Self.kb(1), keys: [workspace.key], extra: ["--model-dir", older], channel: channel)
            try #require(run.status == 0, "\(run.error)")
        }
        for n in 2...3 { try workspace.publish(Self.kb(n)) }
        let first = try Self.blobs(workspace, 1)
        let shared = Set(first.model).subtracting(try Self.blobs(workspace, 3).model)
        try #require(!shared.isEmpty && shared.isSubset(of: try Self.blobs(workspace, 1, channel: "tools").model))

        let run = try Binaries.run("cairn-server", ["prune", "--repo", workspace.repo, "--channel", "field", "--keep", "1"], in: workspace.folder)
        #expect(run.status == 0, "\(run.error)")
        #expect(!Self.present(workspace, first.snapshot))
        for blob in shared { #expect(Self.present(workspace, blob)) }
        let verify = try Binaries.run("cairn-server", ["verify", workspace.repo, "--trusted-key", workspace.publicKey], in: workspace.folder)
        #expect(verify.status == 0, "\(verify.output)")

        let missing = try Binaries.run("cairn-server", ["prune", "--repo", workspace.repo, "--channel", "nosuch"], in: workspace.folder)
        #expect(missing.status == 64 && missing.error.split(separator: "\n").count == 1, "\(missing.error)")
    }
}
