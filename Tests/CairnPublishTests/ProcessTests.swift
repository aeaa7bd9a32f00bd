import CairnCore
@testable import CairnPublish
import CairnStore
import CairnTestSupport
import Foundation
import Testing

/// `cairn-server` run as a real process: kills at each stage, the lock, keygen, verify, history.
@Suite("cairn-server processes", .offCooperativePool, .serialized)
struct ProcessTests {
    @Test("Given a publish killed at a stage, when the repository is checked and published again, then v1 stayed current, the next publish succeeds and removes the killed one's scratch folder",
          arguments: PublishStage.allCases)
    func killedPublish(stage: PublishStage) throws {
        let workspace = try Workspace()
        // The publishes' own temporary folder, so that their scratch folders can be counted.
        let temporary = workspace.folder + "/tmp"
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        func scratchFolders() throws -> [String] {
            let parent = ScratchFolder.parent(in: temporary)
            return FileManager.default.fileExists(atPath: parent) ? try FileManager.default.contentsOfDirectory(atPath: parent) : []
        }
        var chunks = SampleKB.chunks(count: 8)
        #expect(try CLI.run(CLI.publishArguments(workspace, source: try workspace.writeSource(chunks)),
                            environment: ["TMPDIR": temporary]).status == 0)
        #expect(try scratchFolders() == [])
        chunks[1].content += " bandage"
        let source = try workspace.writeSource(chunks, name: "kb2.json")

        let running = try CLI.start(CLI.publishArguments(workspace, source: source),
                                    environment: ["CAIRN_PUBLISH_PAUSE_AT": stage.rawValue, "TMPDIR": temporary])
        #expect(running.waitForError(containing: "paused at \(stage.rawValue)"), "\(running.error)")
        running.kill()
        // The lock is taken before the scratch folder is made; every later stage leaves one.
        #expect(try scratchFolders().count == (stage == .locked ? 0 : 1))

        #expect(try workspace.manifest().version == 1)
        #expect(workspace.verify().problems == [])
        let again = try CLI.run(CLI.publishArguments(workspace, source: source), environment: ["TMPDIR": temporary])
        #expect(again.status == 0, "\(again.error)")
        #expect(try scratchFolders() == [])
        let current = try workspace.manifest()
        #expect(current.version == (stage == .versionWritten ? 3 : 2))
        #expect(current.stateRoot != (try workspace.manifest(1)).stateRoot)
        #expect(workspace.verify().problems == [])
    }

    @Test("Given a publish killed once its version file was written (version 2, never current), when the next publish keeps one delta or two (--keep-deltas 1, 2), then its only delta is from version 1, which devices hold, none from the version none has",
          arguments: [1, 2])
    func deltaFromTheCurrentPastAKilledPublish(keepDeltas: Int) throws {
        let workspace = try Workspace()
        var chunks = SampleKB.chunks(count: 8)
        #expect(try CLI.run(CLI.publishArguments(workspace, source: try workspace.writeSource(chunks))).status == 0)
        chunks[1].content += " bandage"
        let source = try workspace.writeSource(chunks, name: "kb2.json")
        let running = try CLI.start(CLI.publishArguments(workspace, source: source),
                                    environment: ["CAIRN_PUBLISH_PAUSE_AT": PublishStage.versionWritten.rawValue])
        #expect(running.waitForError(containing: "paused at version-written"), "\(running.error)")
        running.kill()
        #expect(try workspace.manifest().version == 1)

        // Until 2026-12-07, with two kept, the version none has took one of them.
        let again = try CLI.run(CLI.publishArguments(workspace, source: source, extra: ["--keep-deltas", "\(keepDeltas)"]))
        #expect(again.status == 0, "\(again.error)")
        let current = try workspace.manifest()
        #expect(current.version == 3 && current.deltas.map(\.fromVersion) == [1], "\(current.deltas.map(\.fromVersion))")
    }

    @Test("Given a publish holding the lock, when a second one starts, then it refuses with exit 75 and succeeds once the first is gone")
    func concurrentPublishes() throws {
        let workspace = try Workspace()
        let source = try workspace.writeSource(SampleKB.chunks(count: 5))
        let holder = try CLI.start(CLI.publishArguments(workspace, source: source),
                                   environment: ["CAIRN_PUBLISH_PAUSE_AT": "locked"])
        defer { holder.kill() }  // also when a step below throws; once reaped, kill() does nothing
        #expect(holder.waitForError(containing: "paused at locked"))
        let second = try CLI.run(CLI.publishArguments(workspace, source: source, extra: ["--lock-wait", "0.3"]))
        #expect(second.status == 75)
        #expect(second.error.contains("another publish holds"))
        #expect(second.error.split(separator: "\n").count == 1)
        holder.kill()
        let third = try CLI.run(CLI.publishArguments(workspace, source: source))
        #expect(third.status == 0, "\(third.error)")
        #expect(third.output.hasPrefix("published version 1: 5 chunks"))
    }

    @Test("Given a staged version and a publish holding the lock, when sign is run on the staged file itself, then it refuses with exit 75 in one line and leaves the file as it was; also through a link to it; a copy outside the repository is signed meanwhile, and the staged file through the link, which stays a link, once the lock is free")
    func signTakesTheLock() throws {
        let workspace = try Workspace()
        let staged = try CLI.run(CLI.publishArguments(workspace, source: try workspace.writeSource(SampleKB.chunks(count: 5)),
                                                      extra: ["--stage"]))
        #expect(staged.status == 0, "\(staged.error)")
        let stagedPath = workspace.repo + "/staged/stable/1.json"
        let before = try FileSystem.read(stagedPath)
        let keys = try TemporaryDirectory.make() + "/second"
        #expect(try CLI.run(["keygen", "--out", keys]).status == 0)
        let copy = try TemporaryDirectory.make() + "/1.json"
        try FileSystem.writeAtomically(before, to: copy)

        let holder = try CLI.start(CLI.publishArguments(workspace, source: try workspace.writeSource(SampleKB.chunks(count: 6))),
                                   environment: ["CAIRN_PUBLISH_PAUSE_AT": "locked"])
        defer { holder.kill() }  // also when a step below throws; once reaped, kill() does nothing
        #expect(holder.waitForError(containing: "paused at locked"), "\(holder.error)")
        let refused = try CLI.run(["sign", "--manifest", stagedPath, "--key", keys + "/publisher.key", "--lock-wait", "0.3"])
        #expect(refused.status == 75, "\(refused.error)")
        #expect(refused.error.contains("another publish holds") && refused.error.split(separator: "\n").count == 1, "\(refused.error)")
        #expect(try FileSystem.read(stagedPath) == before)
        // A link to the staged file is the staged file.
        let link = try TemporaryDirectory.make() + "/to-sign.json"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: stagedPath)
        let throughLink = try CLI.run(["sign", "--manifest", link, "--key", keys + "/publisher.key", "--lock-wait", "0.3"])
        #expect(throughLink.status == 75, "\(throughLink.error)")
        let elsewhere = try CLI.run(["sign", "--manifest", copy, "--key", keys + "/publisher.key", "--lock-wait", "0.3"])
        #expect(elsewhere.status == 0, "\(elsewhere.error)")
        holder.kill()

        let signed = try CLI.run(["sign", "--manifest", link, "--key", keys + "/publisher.key"])
        #expect(signed.status == 0, "\(signed.error)")
        #expect(try SignedManifest.decodeEnvelope(FileSystem.read(stagedPath)).signatures.count == 2)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == stagedPath, "the link was replaced by a file")
    }

    @Test("Given three versions, when prune --dry-run runs while a publish holds the lock, then it refuses with exit 75; on a copy of the repository on a read-only file system (a mirror), it says what would go and exits 0, while prune itself refuses with exit 74 in one line")
    func dryRunReadsAReadOnlyMirror() throws {
        let workspace = try Workspace()
        for count in 5...7 {
            let published = try CLI.run(CLI.publishArguments(workspace, source: try workspace.writeSource(SampleKB.chunks(count: count), name: "kb\(count).json")))
            #expect(published.status == 0, "\(published.error)")
        }
        let holder = try CLI.start(CLI.publishArguments(workspace, source: try workspace.writeSource(SampleKB.chunks(count: 8))),
                                   environment: ["CAIRN_PUBLISH_PAUSE_AT": "locked"])
        defer { holder.kill() }  // also when a step below throws; once reaped, kill() does nothing
        #expect(holder.waitForError(containing: "paused at locked"), "\(holder.error)")
        let waited = try CLI.run(["prune", "--repo", workspace.repo, "--keep", "1", "--dry-run", "--lock-wait", "0.3"])
        #expect(waited.status == 75 && waited.error.contains("another publish holds"), "\(waited.error)")
        holder.kill()

        let disk = try Tmpfs(megabytes: 64)
        defer { disk.unmount() }
        let mirror = disk.path + "/repo"
        let copied = try Binaries.run("/bin/cp", ["-a", workspace.repo, mirror], in: "/tmp")
        #expect(copied.status == 0, "\(copied.error)")
        try disk.remount("ro")
        let dry = try CLI.run(["prune", "--repo", mirror, "--keep", "1", "--dry-run"])
        #expect(dry.status == 0, "\(dry.error)")
        #expect(dry.output.hasPrefix("would remove 3 blob(s)") && dry.output.contains("(--dry-run: nothing removed)"), "\(dry.output)")
        let pruned = try CLI.run(["prune", "--repo", mirror, "--keep", "1"])
        #expect(pruned.status == 74 && pruned.error.contains("Read-only file system") && pruned.error.split(separator: "\n").count == 1,
                "\(pruned.status) \(pruned.error)")
    }

    @Test("Given --delta-format 1 and then 3, when publishing, then the first writes deltas a cairnd from before format 2 reads and the second is refused with exit 64, one line, and nothing written")
    func deltaFormats() throws {
        let workspace = try Workspace()
        for (round, chunks) in [SampleKB.chunks(count: 6), SampleKB.chunks(count: 7)].enumerated() {
            let source = try workspace.writeSource(chunks)
            let published = try CLI.run(CLI.publishArguments(workspace, source: source, extra: ["--delta-format", "1"]))
            #expect(published.status == 0, "round \(round): \(published.error)")
        }
        let ref = try #require(try workspace.manifest(2).deltas.first)
        let compressed = try workspace.repository.blob(ref.sha256, size: ref.size, what: "delta")
        let bytes = try CairnStore.Zlib.decompress(compressed, expectedSize: ref.uncompressedSize)
        #expect(Array(bytes.prefix(8)) == Delta.magic)
        #expect(try Delta.decode(bytes).toSetHash == nil)

        let refused = try CLI.run(CLI.publishArguments(workspace, source: try workspace.writeSource(SampleKB.chunks(count: 8)),
                                                       extra: ["--delta-format", "3"]))
        #expect(refused.status == 64)
        #expect(refused.error.contains("delta-format must be 1 or 2") && refused.error.split(separator: "\n").count == 1)
        #expect(try workspace.manifest().version == 2)
    }

    @Test("Given --overlap-words above half of --chunk-words, when publishing, then it is refused with exit 64 in one line giving the most allowed, and nothing is written")
    func overlapTooLarge() throws {
        let workspace = try Workspace()
        let source = try workspace.writeSource(SampleKB.chunks(count: 5))
        let refused = try CLI.run(CLI.publishArguments(workspace, source: source, extra: ["--chunk-words", "100", "--overlap-words", "51"]))
        #expect(refused.status == 64)
        #expect(refused.error.contains("--overlap-words must be from 0 to half of --chunk-words (50)")
                && refused.error.split(separator: "\n").count == 1, "\(refused.error)")
        #expect(workspace.repository.versionNumbers("stable").isEmpty)
    }

    @Test("Given the signing key inside the repository (keys/, where publish writes the .pub), when publishing or signing a staged version, then it is refused with exit 77 in one line and nothing is written; a key others may read is published with a warning")
    func keyInsideRepositoryRefused() throws {
        let workspace = try Workspace()
        let source = try workspace.writeSource(SampleKB.chunks(count: 5))
        let inside = workspace.repo + "/keys/publisher.key"
        try FileManager.default.createDirectory(atPath: workspace.repo + "/keys", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: workspace.keyDir + "/publisher.key", toPath: inside)
        var arguments = CLI.publishArguments(workspace, source: source)
        arguments[arguments.firstIndex(of: "--key")! + 1] = inside
        let refused = try CLI.run(arguments)
        #expect(refused.status == 77, "\(refused.error)")
        #expect(refused.error.contains("the private key \(inside) is inside the repository")
                && refused.error.split(separator: "\n").count == 1, "\(refused.error)")
        #expect(workspace.repository.versionNumbers("stable").isEmpty)

        try FileManager.default.removeItem(atPath: inside)
        chmod(workspace.keyDir + "/publisher.key", 0o644)
        let published = try CLI.run(CLI.publishArguments(workspace, source: source))
        #expect(published.status == 0, "\(published.error)")
        #expect(published.error.contains("warning: the private key \(workspace.keyDir)/publisher.key may be read by others (mode 644); chmod 600 it"),
                "\(published.error)")

        // sign refuses it too (until 2026-12-07 it signed a staged file with a key inside).
        #expect(try CLI.run(CLI.publishArguments(workspace, source: source, extra: ["--stage"])).status == 0)
        try FileManager.default.copyItem(atPath: workspace.keyDir + "/publisher.key", toPath: inside)
        let staged = workspace.repo + "/staged/stable/2.json"
        let signed = try CLI.run(["sign", "--manifest", staged, "--key", inside])
        #expect(signed.status == 77 && signed.error.contains("the private key \(inside) is inside the repository"), "\(signed.error)")
    }

    @Test("Given a publish under umask 077 (root's cron, a hardened shell) into a folder others may read, then the repository is readable by all (files 0644, folders 0755; a new one a few folders down too), so a web server of another user serves it, and a private key and the embedding cache stay 0600; into a private folder (0700), the umask's modes stay")
    func publishUnderStrictUmask() throws {
        let workspace = try Workspace()
        let parent = (workspace.repo as NSString).deletingLastPathComponent
        try #require(chmod(parent, 0o755) == 0)
        let source = try workspace.writeSource(SampleKB.chunks(count: 5))
        let strict = { (arguments: [String]) in
            try Binaries.run("/bin/sh", ["-c", #"umask 077 && exec "$0" "$@""#, CLI.binary] + arguments, in: "/tmp")
        }
        let keys = (workspace.repo as NSString).deletingLastPathComponent + "/strict-keys"
        #expect(try strict(["keygen", "--out", keys]).status == 0)
        var arguments = CLI.publishArguments(workspace, source: source)
        arguments[arguments.firstIndex(of: "--key")! + 1] = keys + "/publisher.key"
        let published = try strict(arguments)
        try #require(published.status == 0, "\(published.error)")
        func mode(_ path: String) -> mode_t? {
            var info = stat()
            return stat(path, &info) == 0 ? info.st_mode & 0o777 : nil
        }
        // Until 2026-12-07: 0600 and 0700, as the umask made them.
        let manifest = workspace.repo + "/channels/stable/manifest.json"
        #expect(mode(manifest) == 0o644 && mode(workspace.repo + "/channels/stable") == 0o755)
        let blobs = workspace.repo + "/blobs/sha256"
        let fanOut = try #require(try FileManager.default.contentsOfDirectory(atPath: blobs).first)
        let blob = try #require(try FileManager.default.contentsOfDirectory(atPath: blobs + "/" + fanOut).first)
        #expect(mode(blobs + "/" + fanOut) == 0o755 && mode(blobs + "/" + fanOut + "/" + blob) == 0o644)
        #expect(mode(keys + "/publisher.key") == 0o600)
        // The embedding cache holds every repository's vectors, private ones too: never widened.
        #expect(mode(workspace.cachePath) == 0o600, "\(String(describing: mode(workspace.cachePath)))")
        // A repository a few folders below one that exists takes that folder's readability.
        let deep = parent + "/fresh/deeper/repo"
        var first = CLI.publishArguments(workspace, source: source)
        first[first.firstIndex(of: "--repo")! + 1] = deep
        first[first.firstIndex(of: "--key")! + 1] = keys + "/publisher.key"
        try #require(try strict(first).status == 0)
        #expect(mode(parent + "/fresh") == 0o755 && mode(deep + "/channels/stable/manifest.json") == 0o644)

        // A private repository: its folder 0700, and what the next publish writes stays 0600.
        try #require(chmod(workspace.repo, 0o700) == 0)
        let more = try workspace.writeSource(SampleKB.chunks(count: 6), name: "kb2.json")
        arguments[arguments.firstIndex(of: "--source")! + 1] = more
        let again = try strict(arguments)
        try #require(again.status == 0, "\(again.error)")
        #expect(mode(manifest) == 0o600)
    }

    @Test("Given two publishes started together without pausing, when both finish, then they got distinct versions and the repository verifies")
    func racingPublishes() throws {
        let workspace = try Workspace()
        let source = try workspace.writeSource(SampleKB.chunks(count: 5))
        let a = try CLI.start(CLI.publishArguments(workspace, source: source, extra: ["--lock-wait", "60"]))
        let b = try CLI.start(CLI.publishArguments(workspace, source: source, extra: ["--lock-wait", "60"]))
        #expect(a.wait() == 0)
        #expect(b.wait() == 0)
        #expect(workspace.repository.versionNumbers("stable") == [1, 2])
        #expect(workspace.verify().problems == [])
    }

    @Test("Given keygen, when run twice into one folder, then the key is 0600 and the second run refuses to overwrite; into a repository's folder it is refused (exit 77) and writes nothing")
    func keygen() throws {
        let folder = try TemporaryDirectory.make() + "/keys"
        let first = try CLI.run(["keygen", "--out", folder])
        #expect(first.status == 0)
        let mode = try FileManager.default.attributesOfItem(atPath: folder + "/publisher.key")[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let key = try KeyFiles.loadPrivate(folder + "/publisher.key")
        #expect(try KeyFiles.loadPublic(folder + "/publisher.pub") == key.publicKey)
        #expect(first.output.contains(key.keyID.hex))
        let second = try CLI.run(["keygen", "--out", folder])
        #expect(second.status != 0)
        #expect(second.error.contains("already exists"))
        #expect(try KeyFiles.loadPrivate(folder + "/publisher.key").seed == key.seed)

        // Not inside a repository (its keys/ folder, where publish writes the .pub): refused 77.
        let workspace = try Workspace()
        #expect(try CLI.run(CLI.publishArguments(workspace, source: try workspace.writeSource(SampleKB.chunks(count: 5)))).status == 0)
        let inside = try CLI.run(["keygen", "--out", workspace.repo + "/keys/more"])
        #expect(inside.status == 77 && inside.error.contains("is inside the repository"), "\(inside.error)")
        #expect(!FileManager.default.fileExists(atPath: workspace.repo + "/keys/more"))
        // A folder with a channels/ of its own that is no repository (a cairnd data directory).
        let data = try TemporaryDirectory.make() + "/data"
        try FileManager.default.createDirectory(atPath: data + "/channels", withIntermediateDirectories: true)
        #expect(try CLI.run(["keygen", "--out", data + "/keys"]).status == 0)
    }

    @Test("Given two versions, when verify and history run, then verify exits 0 until a blob is altered (64 naming why for a trusted root it cannot read) and history lists both")
    func verifyAndHistory() throws {
        let workspace = try VerifyTests.twoVersions()
        let pinned = try CLI.run(["verify", workspace.repo, "--trusted-key", workspace.keyDir + "/publisher.pub"])
        #expect(pinned.status == 0, "\(pinned.output)")
        #expect(pinned.output.contains("1 delta(s)"))
        let stored = try CLI.run(["verify", workspace.repo])
        #expect(stored.status == 0)
        #expect(stored.output.contains("no --trusted-key given"))
        let missingRoot = try CLI.run(["verify", workspace.repo, "--trusted-root", workspace.keyDir + "/none.json"])
        #expect(missingRoot.status == 64 && missingRoot.error.contains("cannot read trusted root \(workspace.keyDir)/none.json: No such file or directory"),
                "\(missingRoot.error)")

        for command in ["history", "list"] {
            let history = try CLI.run([command, "--repo", workspace.repo, "--channel", "stable"])
            #expect(history.status == 0)
            let lines = history.output.split(separator: "\n")
            #expect(lines.count == 3)
            #expect(lines[2].hasPrefix("*       2"))
            #expect(lines[2].hasSuffix("1:" + String(try workspace.manifest(2).deltas[0].size)))
        }

        try VerifyTests.flipLastByte(workspace.repository.blobs.path(of: try workspace.manifest(1).snapshot.sha256))
        let broken = try CLI.run(["verify", workspace.repo])
        #expect(broken.status == 1)
        #expect(broken.output.split(separator: "\n").filter { $0.hasPrefix("problem: ") }.count >= 1)
    }

    /// A workspace whose repository has root 1 (root key `keys/root.key`, the workspace's
    /// publisher key signing), expiring in `expiresDays`; and its keys folder.
    static func rootedWorkspace(expiresDays: Int) throws -> (Workspace, String) {
        let workspace = try Workspace()
        let keys = workspace.keyDir
        try #require(try CLI.run(["keygen", "--out", keys, "--name", "root"]).status == 0)
        try #require(try CLI.run(["root", "init", "--repo", workspace.repo, "--root-key", keys + "/root.key",
                                  "--signing-key", keys + "/publisher.pub", "--expires-days", "\(expiresDays)"]).status == 0)
        return (workspace, keys)
    }

    @Test("Given a root that expires within the manifest's life, when publishing, then a one-line warning names it and the publish succeeds; after a rotation to a year, no warning")
    func rootExpiryWarned() throws {
        let (workspace, keys) = try Self.rootedWorkspace(expiresDays: 10)
        let first = try CLI.run(CLI.publishArguments(workspace, source: try workspace.writeSource(SampleKB.chunks(count: 5))))
        #expect(first.status == 0, "\(first.error)")
        let warnings = first.error.split(separator: "\n").filter { $0.contains("warning: ") }
        #expect(warnings.count == 1, "\(first.error)")
        #expect(warnings.first?.contains("root 1 expires at") == true && warnings.first?.contains("before this version does") == true
            && warnings.first?.contains("cairn-server root rotate") == true, "\(first.error)")

        #expect(try CLI.run(["root", "rotate", "--repo", workspace.repo, "--sign-with", keys + "/root.key"]).status == 0)
        let second = try CLI.run(CLI.publishArguments(workspace, source: try workspace.writeSource(SampleKB.chunks(count: 6))))
        #expect(second.status == 0, "\(second.error)")
        #expect(!second.error.contains("warning: "), "\(second.error)")
    }

    @Test("Given a source folder holding an empty Markdown file beside the others, when published, then it succeeds and one warning line names the empty file")
    func emptyFileWarned() throws {
        let workspace = try Workspace()
        let folder = try TemporaryDirectory.make()
        try "# Water\n\nBoil water for one minute.".write(toFile: folder + "/water.md", atomically: true, encoding: .utf8)
        try "".write(toFile: folder + "/fire.md", atomically: true, encoding: .utf8)
        let published = try CLI.run(CLI.publishArguments(workspace, source: folder))
        #expect(published.status == 0, "\(published.error)")
        let warnings = published.error.split(separator: "\n").filter { $0.contains("warning: ") }
        #expect(warnings.count == 1 && warnings.first?.contains("warning: \(folder)/fire.md holds no text") == true, "\(published.error)")
    }

    @Test("Given a root already expired, or expiring within 90 days after the version does, when its warning is judged, then each says so; a root outliving both is not named")
    func rootExpiryWarningText() throws {
        let created = try #require(Timestamp(secondsSince1970: 2_000_000_000))
        let expires = try #require(Timestamp(secondsSince1970: 2_000_000_000 + 30 * 86_400))
        let key = PublisherKey.generate().publicKey
        func root(days: Int64) throws -> RootMetadata {
            try RootMetadata(version: 3, created: try #require(Timestamp(secondsSince1970: 1_900_000_000)),
                             expires: try #require(Timestamp(secondsSince1970: 2_000_000_000 + days * 86_400)),
                             rootKeys: [key], rootThreshold: 1, signingKeys: [key], signingThreshold: 1)
        }
        func warning(_ days: Int64) throws -> String? { Publisher.rootExpiryWarning(try root(days: days), created: created, expires: expires) }
        #expect(try warning(-1)?.contains("root 3 expired at") == true)
        #expect(try warning(20)?.contains("before this version does") == true)
        let soon = try warning(60)
        #expect(soon?.contains("in 60 day(s)") == true && soon?.contains("before this version") == false)
        #expect(try warning(91) == nil)
    }

    @Test("Given root/1.root.json holding a self-signed root 2 (root 2 copied over it), when verify runs, then it is refused naming the file, as every device pinned to root 1 would refuse the chain")
    func firstRootMustBeRootOne() throws {
        let (workspace, keys) = try Self.rootedWorkspace(expiresDays: 365)
        // Root 2 keeps root 1's root key, so it is self-signed too.
        #expect(try CLI.run(["root", "rotate", "--repo", workspace.repo, "--sign-with", keys + "/root.key"]).status == 0)
        #expect(try CLI.run(CLI.publishArguments(workspace, source: try workspace.writeSource(SampleKB.chunks(count: 3)))).status == 0)
        let whole = try CLI.run(["verify", workspace.repo])
        #expect(whole.status == 0, "\(whole.output) \(whole.error)")
        let folder = workspace.repo + "/root"
        try FileManager.default.removeItem(atPath: folder + "/1.root.json")
        try FileManager.default.moveItem(atPath: folder + "/2.root.json", toPath: folder + "/1.root.json")
        let refused = try CLI.run(["verify", workspace.repo])
        #expect(refused.status != 0 && refused.output.contains("1.root.json holds root 2, not root 1"), "\(refused.output) \(refused.error)")
    }

    @Test("Given root init and rotations, when keys are wrong or too few, then nothing is written (exit 64 or 77); when right, then root show and verify check the whole chain")
    func rootCommands() throws {
        let folder = try TemporaryDirectory.make()
        let repo = folder + "/repo", keys = folder + "/keys"
        for name in ["root-a", "root-b", "sign-1", "sign-2"] {
            #expect(try CLI.run(["keygen", "--out", keys, "--name", name]).status == 0)
        }
        #expect(FileManager.default.fileExists(atPath: keys + "/root-a.key") && FileManager.default.fileExists(atPath: keys + "/sign-2.pub"))
        // A threshold above the keys given: nothing written.
        let tooFew = try CLI.run(["root", "init", "--repo", repo, "--root-key", keys + "/root-a.key", "--root-threshold", "2",
                                  "--signing-key", keys + "/sign-1.pub"])
        #expect(tooFew.status == 64 && !FileManager.default.fileExists(atPath: repo + "/root/1.root.json"))
        #expect(try CLI.run(["root", "init", "--repo", repo, "--root-key", keys + "/root-a.key", keys + "/root-b.key",
                             "--root-threshold", "2", "--signing-key", keys + "/sign-1.pub"]).status == 0)
        let again = try CLI.run(["root", "init", "--repo", repo, "--root-key", keys + "/root-a.key", "--signing-key", keys + "/sign-1.pub"])
        #expect(again.status == 64 && again.error.contains("already holds a root"))
        // One of two root keys cannot rotate (exit 77, nothing written); both can.
        let alone = try CLI.run(["root", "rotate", "--repo", repo, "--sign-with", keys + "/root-a.key", "--add-signing-key", keys + "/sign-2.pub"])
        #expect(alone.status == 77 && alone.error.contains("1 of root 1's root keys"))
        #expect(!FileManager.default.fileExists(atPath: repo + "/root/2.root.json"))
        let rotated = try CLI.run(["root", "rotate", "--repo", repo, "--sign-with", keys + "/root-a.key", keys + "/root-b.key",
                                   "--add-signing-key", keys + "/sign-2.pub", "--remove-signing-key", keys + "/sign-1.pub"])
        #expect(rotated.status == 0, "\(rotated.error)")
        let show = try CLI.run(["root", "show", "--repo", repo, "--json"])
        let shown = try JSONSerialization.jsonObject(with: Data(show.output.utf8)) as? [String: Any]
        #expect(shown?["chain"] as? [Int] == [1, 2])
        let signing = (shown?["root"] as? [String: Any])?["signing_keys"] as? [[String: Any]]
        #expect(signing?.map { $0["key_id"] as? String } == [try KeyFiles.loadPublic(keys + "/sign-2.pub").keyID.hex])
        // A rotation that would not do what was meant writes nothing (exit 64): removing a key
        // root 2 does not hold (the one believed revoked), adding one it holds, or dropping
        // under a threshold without naming the new one (2 of 2 root keys, one removed).
        let both = ["--sign-with", keys + "/root-a.key", keys + "/root-b.key"]
        for (arguments, saying) in [(["--remove-signing-key", keys + "/sign-1.pub"], "is not a signing key of root 2"),
                                    (["--add-signing-key", keys + "/sign-2.pub"], "is already a signing key of root 2"),
                                    (["--remove-root-key", keys + "/root-b.pub"], "fewer than the threshold 2; give the new threshold with --root-threshold")] {
            let refused = try CLI.run(["root", "rotate", "--repo", repo] + both + arguments)
            #expect(refused.status == 64 && refused.error.contains(saying), "\(arguments): \(refused.status) \(refused.error)")
            #expect(!FileManager.default.fileExists(atPath: repo + "/root/3.root.json"))
        }
        // An altered root breaks the chain for show and verify.
        let path = repo + "/root/2.root.json"
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        let at = bytes.firstIndex(of: UInt8(ascii: "9"))!
        bytes[at] = UInt8(ascii: "8")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let broken = try CLI.run(["root", "show", "--repo", repo])
        #expect(broken.status == 74 && broken.error.contains("2.root.json"))
    }

    @Test("Given a repository inside the source folder (--repo kb/repo --source kb), when published twice, then both succeed and the second says the repository is not read as a source")
    func repositoryInsideTheSource() throws {
        let workspace = try Workspace()
        let kb = workspace.folder + "/kb"
        try FileManager.default.createDirectory(atPath: kb, withIntermediateDirectories: true)
        try "Boil water for one minute.".write(toFile: kb + "/water.md", atomically: true, encoding: .utf8)
        let arguments = ["publish", "--repo", kb + "/repo", "--channel", "stable", "--source", kb, "--key", workspace.keyDir + "/publisher.key",
                         "--model-dir", workspace.modelDir, "--cache", workspace.cachePath]
        let first = try CLI.run(arguments)
        #expect(first.status == 0, "\(first.error)")
        // Until 2026-12-07 the second read the first's manifests as records: "a .json source
        // must be an array of records" (exit 65).
        try "Then let it cool.".write(toFile: kb + "/cool.md", atomically: true, encoding: .utf8)
        let second = try CLI.run(arguments)
        #expect(second.status == 0 && second.output.hasPrefix("published version 2: 2 chunks"), "\(second.output) \(second.error)")
        #expect(second.error.contains(kb + "/repo is the repository published to: not read as a source"), "\(second.error)")
    }

    @Test("Given a root whose signing threshold is 2, when one key is given twice (a copy of its file), then publish and root init refuse with exit 64 in one line naming both files and write nothing; with two keys the publish goes through")
    func keyGivenTwice() throws {
        let workspace = try Workspace()
        let keys = workspace.keyDir
        for name in ["second", "root"] { #expect(try CLI.run(["keygen", "--out", keys, "--name", name]).status == 0) }
        let copy = keys + "/publisher-copy.key"
        try FileSystem.writeAtomically(try FileSystem.read(keys + "/publisher.key"), to: copy)
        chmod(copy, 0o600)
        #expect(try CLI.run(["root", "init", "--repo", workspace.repo, "--root-key", keys + "/root.key",
                             "--signing-key", keys + "/publisher.pub", keys + "/second.pub", "--threshold", "2"]).status == 0)
        let source = try workspace.writeSource(SampleKB.chunks(count: 3))
        // Until 2026-12-07: "needs 2 signing keys and 1 were given" (exit 77), naming neither file;
        // root init said its root_threshold field was out of range.
        let twice = try CLI.run(CLI.publishArguments(workspace, source: source, extra: ["--key", copy]))
        #expect(twice.status == 64 && twice.error.contains("publisher.key and \(copy) hold the same key"), "\(twice.status) \(twice.error)")
        #expect(twice.error.split(separator: "\n").count == 1)
        #expect(!FileManager.default.fileExists(atPath: workspace.repository.manifestPath("stable")))
        let rootTwice = try CLI.run(["root", "init", "--repo", workspace.folder + "/other", "--root-key", keys + "/root.key",
                                     keys + "/root.key", "--root-threshold", "2", "--signing-key", keys + "/publisher.pub"])
        #expect(rootTwice.status == 64 && rootTwice.error.contains("hold the same key"), "\(rootTwice.error)")
        #expect(!FileManager.default.fileExists(atPath: workspace.folder + "/other/root/1.root.json"))
        let both = try CLI.run(CLI.publishArguments(workspace, source: source, extra: ["--key", keys + "/second.key"]))
        #expect(both.status == 0, "\(both.error)")
        #expect(try workspace.manifest().version == 1)
    }

    @Test("Given --help for each subcommand, when printed, then it explains the command")
    func help() throws {
        for (command, phrase) in [("keygen", "0600"), ("publish", "CAIRN_PUBLISH_PAUSE_AT"), ("verify", "--trusted-key"),
                                  ("history", "deltas"), ("prune", "--keep"), ("root", "offline"), ("sign", "staged"), ("release", "threshold")] {
            let result = try CLI.run([command, "--help"])
            #expect(result.status == 0)
            #expect(result.output.contains(phrase), "\(command)")
        }
    }
}
