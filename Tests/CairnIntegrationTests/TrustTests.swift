import CairnCore
import CairnTestSupport
import Foundation
import Testing

/// protocol/root.md with real processes: `cairn-server keygen`, `root`, `publish`, `sign`,
/// `release` and `serve` (or nginx), `cairnd` pinned to a root, `cairn export` to a folder that
/// stands for a USB stick. Attackers' files are made with CairnCore (an attacker has the same
/// code) or with the stolen key and `cairn-server sign`.
@Suite("trust: rotating roots, thresholds, revocation, expiry (real processes)", .offCooperativePool, .serialized)
struct TrustTests {
    static let version3: Workspace.KB = RollbackExportTests.version3
    static let version4: Workspace.KB = version3 + [("candle", "Candles start fires; use a torch with spare batteries.")]

    static func pub(_ key: String) -> String { String(key.dropLast(4)) + ".pub" }

    /// Root 1 of `workspace`, copied where a device is provisioned with it.
    static func pinnedRoot(_ workspace: Workspace) throws -> String {
        let pinned = workspace.folder + "/provisioned-root.json"
        try FileManager.default.copyItem(atPath: workspace.repo + "/root/1.root.json", toPath: pinned)
        return pinned
    }

    /// The workspace's current manifest with `created` and `expires` changed, signed by `key`
    /// alone (a stick made back then, or a thief's re-dating with a stolen key), written to `path`.
    static func redated(_ w: Workspace, created: String, expires: String, key: String, to path: String) throws -> String {
        var envelope = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: w.manifestPath))) as! [String: Any]
        var manifest = envelope["manifest"] as! [String: Any]
        manifest["created"] = created
        manifest["expires"] = expires
        envelope = ["manifest": manifest, "signatures": [Any]()]
        try JSONSerialization.data(withJSONObject: envelope).write(to: URL(fileURLWithPath: path))
        try w.server(["sign", "--manifest", path, "--key", key])
        return path
    }

    /// A workspace with root 1 (root key `r`; signing key 1, or keys 1 and 2 with `bothSign`,
    /// threshold 1), signing key 2 made, version 1 published signed by root 1's signing keys,
    /// and root 1 copied where a device is provisioned with it.
    static func rooted(bothSign: Bool = false) throws -> (w: Workspace, r: String, s1: String, s2: String, pinned: String) {
        let w = try Workspace()
        let r = try w.keygen("root"), s1 = try w.keygen("sign1"), s2 = try w.keygen("sign2")
        let signing = bothSign ? [s1, s2] : [s1]
        try w.server(["root", "init", "--repo", w.repo, "--root-key", r, "--signing-key"] + signing.map(Self.pub))
        let pinned = try Self.pinnedRoot(w)
        try w.publish(Workspace.version1, keys: signing)
        return (w, r, s1, s2, pinned)
    }

    /// Serves `w`'s repository (`cairn-server serve`) and starts a device pinned to `pinned`
    /// syncing from it (then from `also`); returns both once version 1 serves.
    static func servedDevice(_ w: Workspace, pinned: String, also: [String] = []) async throws -> (server: Process, url: String, device: DeviceProcess) {
        let (server, url, _) = try await w.serve()
        do {
            let device = try DeviceProcess(w, sources: [url] + also, trust: ["--trusted-root", pinned])
            do { try await device.waitForVersion(1) } catch {
                device.stop()
                throw error
            }
            return (server, url, device)
        } catch {
            stopProcess(server)
            throw error
        }
    }

    /// A thief's version `version` of the workspace's current chunks, unsigned (sign it with the
    /// stolen key): its snapshot's meta says the version, as a publish would write it.
    static func forged(_ w: Workspace, version: Int) async throws -> String {
        let forged = w.folder + "/forged-\(version).json"
        let python = try requireOrSkip(["/usr/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                       "python3 is not installed (scripts/test installs it)")
        let script = """
            import hashlib, json, os, sqlite3, sys, zlib
            repo, source, out, version = sys.argv[1:5]
            envelope = json.load(open(source))
            m = envelope["manifest"]
            blob = lambda h: os.path.join(repo, "blobs/sha256", h[:2], h)
            path = out + ".sqlite"
            open(path, "wb").write(zlib.decompress(open(blob(m["snapshot"]["sha256"]), "rb").read()))
            db = sqlite3.connect(path)
            db.execute("UPDATE meta SET value = ? WHERE key = 'version'", (version,))
            db.commit(); db.close()
            raw = open(path, "rb").read()
            packed = zlib.compress(raw, 9)
            digest = hashlib.sha256(packed).hexdigest()
            os.makedirs(os.path.dirname(blob(digest)), exist_ok=True)
            open(blob(digest), "wb").write(packed)
            m.update(version=int(version), deltas=[], snapshot=dict(m["snapshot"], sha256=digest, size=len(packed), uncompressed_size=len(raw)))
            json.dump({"manifest": m, "signatures": []}, open(out, "w"))
            """
        let made = try await run(python, ["-c", script, w.repo, w.manifestPath, forged, "\(version)"])
        try #require(made.status == 0, "forging version \(version): \(made.stderr)")
        return forged
    }

    /// Makes `file` the manifest `w` serves.
    static func serve(_ w: Workspace, _ file: String) throws {
        try FileManager.default.removeItem(atPath: w.manifestPath)
        try FileManager.default.copyItem(atPath: file, toPath: w.manifestPath)
    }

    /// A thief's version `version` (`forged`) signed with the stolen key `key` and served; returns
    /// once `device` serves it.
    static func thiefInstalls(_ w: Workspace, _ device: DeviceProcess, version: Int, key: String) async throws {
        let forged = try await Self.forged(w, version: version)
        try w.server(["sign", "--manifest", forged, "--key", key])
        try serve(w, forged)
        #expect(try device.cairn(["sync"]).status == 0)
        try await device.waitForVersion(version)
    }

    /// A device on `rooted(bothSign: true)`'s version 1 that installed a thief's version
    /// (`thiefInstalls`, key 1 alone) and rolled back from it: version 1 serves, the thief's is
    /// held back. `genuine`: version 1's manifest as the publisher served it. The server and
    /// the device are the caller's to stop.
    struct RolledBack {
        let w: Workspace
        let r: String, s1: String, s2: String, pinned: String, url: String
        let genuine: Data
        let server: Process
        let device: DeviceProcess
    }

    static func rolledBackFromThief(_ version: Int) async throws -> RolledBack {
        let (w, r, s1, s2, pinned) = try rooted(bothSign: true)
        let genuine = try Data(contentsOf: URL(fileURLWithPath: w.manifestPath))
        let (server, url, device) = try await servedDevice(w, pinned: pinned)
        do {
            try await thiefInstalls(w, device, version: version, key: s1)
            let rollback = try device.cairn(["rollback"])
            try #require(rollback.status == 0, "\(rollback.error)")
            try #require(device.state["held_back_version"] as? Int == version)
        } catch {
            stopProcess(server)
            device.stop()
            throw error
        }
        return RolledBack(w: w, r: r, s1: s1, s2: s2, pinned: pinned, url: url, genuine: genuine, server: server, device: device)
    }

    /// The `created` of the repository's root `version`.
    static func rootCreated(_ w: Workspace, _ version: Int) -> String? {
        let data = FileManager.default.contents(atPath: w.repo + "/root/\(version).root.json")
        let envelope = data.flatMap { try? JSONSerialization.jsonObject(with: $0) } as? [String: Any]
        return (envelope?["root"] as? [String: Any])?["created"] as? String
    }

    static func trust(_ device: DeviceProcess) -> [String: Any] { device.status()["trust"] as? [String: Any] ?? [:] }

    /// Asks for a sync and waits until an attempt that started after the request ended with
    /// `code`; returns the status's one-line message.
    static func waitForError(_ device: DeviceProcess, _ code: String) async throws -> String {
        let before = device.attemptsFinished
        _ = try device.cairn(["sync"])
        try await waitUntil("the device refuses with \(code)", seconds: 60) {
            device.attemptsFinished > before && device.lastErrorCode == code
        }
        return device.syncStatus["last_error"] as? String ?? ""
    }

    @Test("Given rotations 1 → 2 → 3 → 4 that add and remove root and signing keys, when a device pinned to root 1 and offline throughout syncs from a cairn export folder alone, then it walks the chain and installs the newest version")
    func rotationsReachAnOfflineDevice() async throws {
        let w = try Workspace()
        let r1 = try w.keygen("root1"), s1 = try w.keygen("sign1")
        try w.server(["root", "init", "--repo", w.repo, "--root-key", r1, "--signing-key", Self.pub(s1)])
        let pinned = try Self.pinnedRoot(w)
        try w.publish(Workspace.version1, keys: [s1])
        let nginx = try Nginx(root: w.repo)
        defer { nginx.stop() }
        let online = try DeviceProcess(w, sources: [nginx.url], name: "online", trust: ["--trusted-root", pinned])
        defer { online.stop() }
        try await online.waitForVersion(1)

        // Root 2: a second root key joins (2 of 2); signing key 1 is replaced by 2.
        let r2 = try w.keygen("root2"), s2 = try w.keygen("sign2")
        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r1, r2, "--add-root-key", Self.pub(r2),
                      "--root-threshold", "2", "--add-signing-key", Self.pub(s2), "--remove-signing-key", Self.pub(s1)])
        try w.publish(Workspace.version2, keys: [s2])
        // Root 3: root key 1 leaves, 3 joins (1 of 2, 3); signing key 3 joins, 2 of 2 must sign.
        let r3 = try w.keygen("root3"), s3 = try w.keygen("sign3")
        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r1, r2, r3, "--add-root-key", Self.pub(r3),
                      "--remove-root-key", Self.pub(r1), "--root-threshold", "1", "--add-signing-key", Self.pub(s3),
                      "--threshold", "2"])
        try w.publish(Self.version3, keys: [s2, s3])
        // Root 4: signing key 2 revoked, 4 joins, 1 of 2 again.
        let s4 = try w.keygen("sign4")
        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r3, "--remove-signing-key", Self.pub(s2),
                      "--add-signing-key", Self.pub(s4), "--threshold", "1"])
        try w.publish(Self.version4, keys: [s4])
        #expect(try w.server(["verify", w.repo, "--trusted-root", pinned]).contains("4 root(s)"))
        // Anchored on a root devices were not given, verify says the chain is not theirs.
        let otherFolder = w.folder + "/other"
        let otherRoot = try w.keygen("other-root", in: otherFolder)
        try w.server(["root", "init", "--repo", otherFolder + "/repo", "--root-key", otherRoot, "--signing-key", Self.pub(s4)])
        let foreign = try Binaries.run("cairn-server", ["verify", w.repo, "--trusted-root", otherFolder + "/repo/root/1.root.json"],
                                       in: w.folder)
        #expect(foreign.status == 1 && foreign.output.contains("is not the trusted root 1"))

        // The online device follows through nginx, one root at a time.
        #expect(try online.cairn(["sync"]).status == 0)
        try await online.waitForVersion(4)
        #expect(Self.trust(online)["root_version"] as? Int == 4)
        #expect(await nginx.logged { $0.contains("/root/4.root.json") })

        // Its export carries the chain; a device pinned to root 1 that never saw a network takes
        // version 4 from the folder alone.
        let usb = w.folder + "/usb"
        #expect(try online.cairn(["export", "--to", usb]).status == 0)
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: usb + "/root"))
                == ["1.root.json", "2.root.json", "3.root.json", "4.root.json"])
        let offline = try DeviceProcess(w, sources: ["file://" + usb], name: "offline", trust: ["--trusted-root", pinned])
        defer { offline.stop() }
        try await offline.waitForVersion(4)
        let trust = Self.trust(offline)
        #expect(trust["root_version"] as? Int == 4 && trust["signing_threshold"] as? Int == 1)
        let keyID = { (key: String) in try PublicKey(fileText: String(contentsOfFile: Self.pub(key), encoding: .utf8)).keyID.hex }
        #expect(Set(trust["signing_keys"] as? [String] ?? []) == Set([try keyID(s3), try keyID(s4)]))
        #expect(try offline.query("torch batteries", mode: "lexical").ids.first == "candle")
    }

    @Test("Given a threshold of 2 of 3 signing keys, when a version is signed on one machine, then release and devices refuse it; when a second machine signs a copy, then it releases and installs")
    func thresholdAcrossMachines() async throws {
        let w = try Workspace()
        let m1 = w.folder + "/machine1", m2 = w.folder + "/machine2"
        let k1 = try w.keygen("signer", in: m1), k2 = try w.keygen("signer", in: m2), k3 = try w.keygen("third")
        let r = try w.keygen("root")
        try w.server(["root", "init", "--repo", w.repo, "--root-key", r, "--signing-key", Self.pub(k1), Self.pub(k2), Self.pub(k3),
                      "--threshold", "2"])
        let pinned = try Self.pinnedRoot(w)

        // One key cannot publish alone (exit 77, nothing written).
        let alone = try w.tryPublish(Workspace.version1, keys: [k1])
        #expect(alone.status == 77 && alone.error.contains("needs 2 signing keys"))
        #expect(!FileManager.default.fileExists(atPath: w.manifestPath))

        // Staged with machine 1's key; the serving host holds no private key at any point.
        try w.publish(Workspace.version1, keys: [k1], extra: ["--stage"])
        let staged = w.repo + "/staged/field/1.json"
        #expect(FileManager.default.fileExists(atPath: staged) && !FileManager.default.fileExists(atPath: w.manifestPath))
        let early = try Binaries.run("cairn-server", ["release", "--repo", w.repo, "--channel", "field"], in: w.folder)
        #expect(early.status == 77 && early.error.contains("1 of the 2"))
        try FileManager.default.copyItem(atPath: staged, toPath: m2 + "/1.json")
        try w.server(["sign", "--manifest", m2 + "/1.json", "--key", k2])
        try w.server(["release", "--repo", w.repo, "--channel", "field", "--manifest", m2 + "/1.json"])

        let (server, _, device) = try await Self.servedDevice(w, pinned: pinned)
        defer { stopProcess(server); device.stop() }
        let installed = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: device.dataDirectory + "/current/manifest.json"))) as! [String: Any]
        #expect((installed["signatures"] as? [Any])?.count == 2)

        // A host that puts a once-signed version 2 in place: the device refuses it and serves 1.
        try w.publish(Workspace.version2, keys: [k1], extra: ["--stage"])
        try FileManager.default.removeItem(atPath: w.manifestPath)
        try FileManager.default.copyItem(atPath: w.repo + "/staged/field/2.json", toPath: w.manifestPath)
        let line = try await Self.waitForError(device, "threshold_not_met")
        #expect(line.contains("1 of the 2") && !line.contains("\n"))
        #expect(device.status()["version"] as? Int == 1)

        // Signed on machine 2 and released: it installs.
        try FileManager.default.copyItem(atPath: w.repo + "/staged/field/2.json", toPath: m2 + "/2.json")
        try w.server(["sign", "--manifest", m2 + "/2.json", "--key", k2])
        try w.server(["release", "--repo", w.repo, "--channel", "field", "--manifest", m2 + "/2.json"])
        #expect(try device.cairn(["sync"]).status == 0)
        try await device.waitForVersion(2)
    }

    @Test("Given a stolen signing key used for a version far ahead (1,000,000,000) or just ahead (2) of the publisher's, when the publisher revokes it, then the version it alone signed no longer counts, the device says it is recovering, the publisher's next version installs, and a rollback refuses the thief's",
          arguments: [1_000_000_000, 2])
    func revocationAndRecovery(thief: Int) async throws {
        let (w, r, s1, s2, pinned) = try Self.rooted()
        let genuine = try Data(contentsOf: URL(fileURLWithPath: w.manifestPath))
        let (server, _, device) = try await Self.servedDevice(w, pinned: pinned)
        defer { stopProcess(server); device.stop() }

        // The thief signs version `thief` of the same chunks with the stolen key (its snapshot's
        // meta says so, as a publish would write it); the device takes it.
        try await Self.thiefInstalls(w, device, version: thief, key: s1)

        // The publisher revokes key 1 (root 2 adds key 2) and restores its own manifest, which
        // key 1 signed too: it no longer counts either.
        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r, "--remove-signing-key", Self.pub(s1),
                      "--add-signing-key", Self.pub(s2)])
        try genuine.write(to: URL(fileURLWithPath: w.manifestPath))
        let line = try await Self.waitForError(device, "key_revoked")
        #expect(line.contains("revoked") && !line.contains("\n"))
        var trust = Self.trust(device)
        #expect(trust["root_version"] as? Int == 2 && trust["recovering"] as? Bool == true)
        #expect(trust["recovering_from"] as? Int == thief)
        #expect(device.status()["version"] as? Int == thief, "it keeps serving while it recovers")

        // The publisher's next version installs: 2, far below 10^9; or, against a thief's 2, the
        // publisher's 3 (its 2 published before the device looked again).
        try w.publish(Workspace.version2, keys: [s2])
        let next = thief == 2 ? 3 : 2
        if next == 3 { try w.publish(Workspace.version2 + [("after", "Published after the recovery began.")], keys: [s2]) }
        #expect(try device.cairn(["sync", "--wait"]).status == 0)
        try await device.waitForVersion(next)
        trust = Self.trust(device)
        #expect(trust["recovering"] as? Bool == false)
        #expect(device.log.contains("recovered: version \(next) replaces version \(thief)"))
        // The version before is the thief's, whatever its number: the publisher's version does not
        // name it as a delta base, so a rollback refuses it, and the publisher's version answers.
        #expect((device.status()["sync"] as? [String: Any])?["previous_version"] as? Int == thief)
        let rollback = try device.cairn(["rollback"])
        #expect(rollback.status != 0 && rollback.error.contains("previous_unusable") && rollback.error.contains("revoked"),
                "\(rollback.output) \(rollback.error)")
        #expect(device.status()["version"] as? Int == next)
    }

    @Test("Given a thief's version 2 installed with a stolen key, when the publisher revokes the key and publishes its own version 2, then the device installs it over the thief's folder under query load: no query fails, the publisher's state root and chunks answer, and the thief's folder is gone")
    func recoveryAtTheSameNumber() async throws {
        let (w, r, s1, s2, pinned) = try Self.rooted()
        let genuine = try Data(contentsOf: URL(fileURLWithPath: w.manifestPath))
        let (server, _, device) = try await Self.servedDevice(w, pinned: pinned)
        defer { stopProcess(server); device.stop() }
        try await Self.thiefInstalls(w, device, version: 2, key: s1)
        let thiefRoot = try #require(device.status()["state_root"] as? String)
        #expect(try device.query("sandbags pyramid").ids.first != "sandbag")
        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r, "--remove-signing-key", Self.pub(s1),
                      "--add-signing-key", Self.pub(s2)])
        try genuine.write(to: URL(fileURLWithPath: w.manifestPath))
        _ = try await Self.waitForError(device, "key_revoked")
        try w.publish(Workspace.version2, keys: [s2])
        let published = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: w.manifestPath))) as? [String: Any]
        let manifest = try #require(published?["manifest"] as? [String: Any])
        try #require(manifest["version"] as? Int == 2, "the publisher's next version is \(manifest["version"] ?? "none")")
        let publisherRoot = try #require(manifest["state_root"] as? String)
        #expect(publisherRoot != thiefRoot)

        // Queries in a loop from before the sync until after the publisher's version serves.
        let done = RollbackExportTests.Flag(), answered = RollbackExportTests.Counter()
        let socket = device.socket, loopFolder = device.folder + "/query-loop"
        async let load = RollbackExportTests.queryLoop(socket: socket, folder: loopFolder, versions: [2], done: done, answered: answered)
        try await waitUntil("the query loop answers", seconds: 60) { answered.count > 0 }
        let synced = try device.cairn(["sync", "--wait"])
        done.set()
        let (queries, failures) = try await load
        #expect(synced.status == 0, "\(synced.error)")
        #expect(failures.isEmpty, "\(failures.count) of \(queries.count) queries failed: \(failures.prefix(3))")

        #expect(device.status()["state_root"] as? String == publisherRoot)
        #expect(Self.trust(device)["recovering"] as? Bool == false)
        #expect(device.log.contains("recovered: version 2 replaces version 2"))
        // The thief's version 2 held version 1's chunks; the publisher's adds "sandbag".
        #expect(try device.query("sandbags pyramid").ids.first == "sandbag")
        let folders = try FileManager.default.contentsOfDirectory(atPath: device.dataDirectory + "/versions").sorted()
        #expect(!folders.contains { $0.hasSuffix(".replaced") }, "\(folders)")
    }

    @Test("Given a root with two signing keys, a thief holding one who publishes version 1,000,000,000 and re-signs the installed version dated in 9999, and a rollback from the thief's version, when root 2 revokes the stolen key, then the hold and the clock floor the thief raised are lifted, the publisher's next version installs, and status is not stale")
    func revocationBesideAKeptKey() async throws {
        // Either key signs (threshold 1); the publisher signs with both. The thief's version
        // 1,000,000,000, signed with key 1 alone: installed, then rolled back from (version 1
        // signed by both keys, so the rollback is allowed).
        let thief = 1_000_000_000
        let t = try await Self.rolledBackFromThief(thief)
        let (w, r, s1, s2, genuine, device) = (t.w, t.r, t.s1, t.s2, t.genuine, t.device)
        defer { stopProcess(t.server); device.stop() }
        // Then version 1 re-signed with key 1, dated in 9999: found installed, it raises the floor.
        try genuine.write(to: URL(fileURLWithPath: w.manifestPath))
        try Self.serve(w, try Self.redated(w, created: "9999-12-30T00:00:00Z", expires: "9999-12-31T00:00:00Z", key: s1,
                                   to: w.folder + "/redated.json"))
        _ = try device.cairn(["sync"])
        try await waitUntil("the clock floor reaches 9999", seconds: 60) { (device.state["clock_floor"] as? String)?.hasPrefix("9999") == true }

        // Root 2 revokes key 1; version 1 still counts (key 2 signed it), so no recovery starts.
        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r, "--remove-signing-key", Self.pub(s1)])
        try genuine.write(to: URL(fileURLWithPath: w.manifestPath))
        try w.publish(Workspace.version2, keys: [s2])
        // The hold ends once version 2 serves, after its handover: --wait follows the attempt
        // to its end, when the state says so.
        #expect(try device.cairn(["sync", "--wait"]).status == 0)
        try await device.waitForVersion(2)
        let state = device.state
        #expect(state["held_back_version"] == nil && state["highest_version_seen"] as? Int == 2, "\(state)")
        #expect((state["clock_floor"] as? String ?? "9999") < "2100", "\(state)")
        #expect(state["recovering_from"] == nil)
        #expect(device.status()["expired"] as? Bool != true && device.syncStatus["stale"] as? Bool == false, "\(device.status())")
        #expect(device.log.contains("version \(thief), held back by a rollback, is passed over"))
    }

    @Test("Given key 1 (stolen) re-signing the installed version dated in 9999, which raised the clock floor, when root 2 revokes key 1 and the state is then as it was before that walk (roots are written as accepted, the state at the attempt's end: what a kill or a power cut in between leaves), then the next walk, which starts at root 2, still lowers the clock floor")
    func revocationAppliedAfterAKill() async throws {
        let (w, r, s1, _, pinned) = try Self.rooted(bothSign: true)
        let genuine = try Data(contentsOf: URL(fileURLWithPath: w.manifestPath))
        let (server, url, device) = try await Self.servedDevice(w, pinned: pinned)
        defer { stopProcess(server); device.stop() }
        try Self.serve(w, try Self.redated(w, created: "9999-12-30T00:00:00Z", expires: "9999-12-31T00:00:00Z", key: s1,
                                           to: w.folder + "/redated.json"))
        _ = try device.cairn(["sync"])
        try await waitUntil("the clock floor reaches 9999", seconds: 60) { (device.state["clock_floor"] as? String)?.hasPrefix("9999") == true }
        let statePath = device.dataDirectory + "/state.json"
        let before = try Data(contentsOf: URL(fileURLWithPath: statePath))

        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r, "--remove-signing-key", Self.pub(s1)])
        try genuine.write(to: URL(fileURLWithPath: w.manifestPath))
        #expect(try device.cairn(["sync", "--wait"]).status == 0)
        #expect((device.state["clock_floor"] as? String ?? "9999") < "2100", "\(device.state)")
        // On the disk, what a kill after root 2's write and before the state's leaves. Until
        // 2026-12-07 the next walk began at root 2, found nothing removed, and the floor stayed
        // in 9999 for good: every manifest and root expired in the device's eyes.
        device.stop()
        try before.write(to: URL(fileURLWithPath: statePath))
        let again = try DeviceProcess(w, sources: [url], name: "again", dataDirectory: device.dataDirectory, trust: ["--trusted-root", pinned])
        defer { again.stop() }
        try await again.waitForVersion(1)
        #expect(try again.cairn(["sync", "--wait"]).status == 0)
        #expect(Self.trust(again)["root_version"] as? Int == 2)
        #expect((again.state["clock_floor"] as? String ?? "9999") < "2100", "\(again.state)")
        #expect(again.state["revoked_through_root"] as? Int == 2)
    }

    @Test("Given a rollback from a version key 1 alone signed, when one walk takes root 2, which removes key 1, and root 3, which adds it back, then the hold stays (key 1 is trusted again, net) and the version rolled back from does not install again")
    func keyRemovedAndAddedBackKeepsTheHold() async throws {
        let unwanted = 7
        let t = try await Self.rolledBackFromThief(unwanted)
        let (w, r, s1, device) = (t.w, t.r, t.s1, t.device)
        defer { stopProcess(t.server); device.stop() }

        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r, "--remove-signing-key", Self.pub(s1)])
        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r, "--add-signing-key", Self.pub(s1)])
        let waited = try device.cairn(["sync", "--wait"])
        #expect(waited.status == 0, "\(waited.error)")
        #expect(Self.trust(device)["root_version"] as? Int == 3)
        #expect(device.state["held_back_version"] as? Int == unwanted, "\(device.state)")
        #expect(device.status()["version"] as? Int == 1)
    }

    @Test("Given a rollback from a version key 1 alone signed, when a stick listed first holds root 2, which removes key 1, and the origin root 3, which adds it back, then the hold stays across the two walks and the version rolled back from does not install again")
    func keyRemovedByOneSourceAddedBackByAnother() async throws {
        let unwanted = 7
        let t = try await Self.rolledBackFromThief(unwanted)
        let (w, r, s1, pinned, url, device) = (t.w, t.r, t.s1, t.pinned, t.url, t.device)
        defer { stopProcess(t.server); device.stop() }
        device.stop()
        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r, "--remove-signing-key", Self.pub(s1)])
        let stick = w.folder + "/stick"
        try FileManager.default.copyItem(atPath: w.repo, toPath: stick)
        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r, "--add-signing-key", Self.pub(s1)])
        let both = try DeviceProcess(w, sources: ["file://" + stick, url], name: "both",
                                     dataDirectory: device.dataDirectory, trust: ["--trusted-root", pinned])
        defer { both.stop() }
        try await both.waitForVersion(1)
        let waited = try both.cairn(["sync", "--wait"])
        #expect(waited.status == 0, "\(waited.error)")
        #expect(Self.trust(both)["root_version"] as? Int == 3)
        #expect(both.state["held_back_version"] as? Int == unwanted, "\(both.state)")
        #expect(both.status()["version"] as? Int == 1)
    }

    @Test("Given a device syncing from an origin and from a stick made before a key rotation, when the origin is up to date after the rotation, then the stick's manifest, signed by the revoked key and older than the installed version, is an older copy in that source's health, and the attempt is up to date, not failed")
    func oldStickAfterARotation() async throws {
        let (w, r, s1, s2, pinned) = try Self.rooted()
        let stick = w.folder + "/stick"
        try FileManager.default.copyItem(atPath: w.repo, toPath: stick)
        let (server, _, device) = try await Self.servedDevice(w, pinned: pinned, also: ["file://" + stick])
        defer { stopProcess(server); device.stop() }

        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r, "--remove-signing-key", Self.pub(s1),
                      "--add-signing-key", Self.pub(s2)])
        try w.publish(Workspace.version2, keys: [s2])
        #expect(try device.cairn(["sync"]).status == 0)
        try await device.waitForVersion(2)

        let before = device.attemptsFinished
        let again = try device.cairn(["sync", "--wait"])
        #expect(again.status == 0, "\(again.output) \(again.error)")
        #expect(device.attemptsFinished > before)
        let sync = device.syncStatus
        #expect(sync["last_outcome"] as? String == "up_to_date" && sync["last_error"] as? String == nil, "\(sync)")
        let sources = sync["sources"] as? [[String: Any]] ?? []
        let health = sources.first { ($0["url"] as? String)?.hasPrefix("file://") == true }
        #expect((health?["last_error"] as? String)?.hasPrefix("rollback: the source holds version 1, not newer than the installed 2") == true,
                "\(sources)")
    }

    @Test("Given a device recovering from a stolen key's version after root 2 revoked that key, when a stale mirror serves a version the publisher signed with the key it kept but made before the rotation, then it is refused as a rollback and the device keeps recovering; the publisher's version made since installs")
    func staleMirrorWhileRecovering() async throws {
        let (w, r, s1, s2, pinned) = try Self.rooted(bothSign: true)
        let (server, _, device) = try await Self.servedDevice(w, pinned: pinned)
        defer { stopProcess(server); device.stop() }
        // Version 2, signed with key 2 alone, is what a mirror still holds after the rotation.
        try w.publish(Workspace.version2, keys: [s2])
        let stale = w.folder + "/stale-v2.json"
        try FileManager.default.copyItem(atPath: w.manifestPath, toPath: stale)
        let thief = 1_000_000_000
        try await Self.thiefInstalls(w, device, version: thief, key: s1)

        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r, "--remove-signing-key", Self.pub(s1)])
        try Self.serve(w, stale)
        let line = try await Self.waitForError(device, "rollback")
        #expect(line.contains("version 2 is not above the installed") && line.contains("before the rotation"), "\(line)")
        #expect(device.status()["version"] as? Int == thief)
        #expect(Self.trust(device)["recovering"] as? Bool == true)
        #expect(device.state["recovering_since"] as? String == Self.rootCreated(w, 2), "\(device.state)")

        try w.publish(Self.version3, keys: [s2])
        #expect(try device.cairn(["sync", "--wait"]).status == 0)
        try await device.waitForVersion(3)
        #expect(Self.trust(device)["recovering"] as? Bool == false && device.state["recovering_since"] == nil)
    }

    @Test("Given a device on version 1, signed by key 1 alone, that stays offline while root 2 adds key 2, version 2 is signed by both, and root 3 removes key 1, when it syncs, then it recovers and installs version 2, made before root 3 but above its own")
    func offlineThroughARoutineRotation() async throws {
        let (w, r, s1, s2, pinned) = try Self.rooted()
        let (server, _, device) = try await Self.servedDevice(w, pinned: pinned)
        defer { stopProcess(server); device.stop() }
        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r, "--add-signing-key", Self.pub(s2)])
        try w.publish(Workspace.version2, keys: [s1, s2])
        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r, "--remove-signing-key", Self.pub(s1)])
        #expect(try device.cairn(["sync", "--wait"]).status == 0)
        try await device.waitForVersion(2)
        #expect(Self.trust(device)["root_version"] as? Int == 3 && Self.trust(device)["recovering"] as? Bool == false)
    }

    @Test("Given a root not signed by the old threshold, a root older than the trusted one, and a forged step in the middle of a chain, then each is refused with one line and the old version keeps serving")
    func refusedRoots() async throws {
        let (w, r, s1, s2, pinned) = try Self.rooted()
        let (server, _, device) = try await Self.servedDevice(w, pinned: pinned)
        defer { stopProcess(server); device.stop() }

        // A root 2 that its author signed alone: it does not chain from root 1.
        let stranger = PublisherKey.generate()
        let now = Timestamp(Date())!
        func strangerRoot(_ version: Int) throws -> [UInt8] {
            let root = try RootMetadata(version: version, created: now, expires: Timestamp(secondsSince1970: now.secondsSince1970 + 86_400)!,
                                        rootKeys: [stranger.publicKey], rootThreshold: 1,
                                        signingKeys: [stranger.publicKey], signingThreshold: 1)
            return SignedRoot.encode(root, signingKeys: [stranger])
        }
        let rootFile = { (n: Int) in w.repo + "/root/\(n).root.json" }
        try Data(try strangerRoot(2)).write(to: URL(fileURLWithPath: rootFile(2)))
        var line = try await Self.waitForError(device, "root_refused")
        #expect(line.contains("does not chain") && !line.contains("\n"))
        #expect(device.status()["version"] as? Int == 1 && Self.trust(device)["root_version"] as? Int == 1)
        try FileManager.default.removeItem(atPath: rootFile(2))

        // The genuine rotation to root 2 and a version under it install.
        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r, "--remove-signing-key", Self.pub(s1),
                      "--add-signing-key", Self.pub(s2)])
        try w.publish(Workspace.version2, keys: [s2])
        #expect(try device.cairn(["sync"]).status == 0)
        try await device.waitForVersion(2)

        // Root 1's bytes offered as root 3: a rollback of trust.
        try FileManager.default.copyItem(atPath: rootFile(1), toPath: rootFile(3))
        line = try await Self.waitForError(device, "root_refused")
        #expect(line.contains("rollback of trust"))
        #expect(device.status()["version"] as? Int == 2 && Self.trust(device)["root_version"] as? Int == 2)
        try FileManager.default.removeItem(atPath: rootFile(3))

        // Genuine roots 3 and 4 and a version signed under 4 — with root 3 replaced by a forgery
        // before the device fetched it: the walk stops at 2 and version 3 does not install.
        let s3 = try w.keygen("sign3")
        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r])
        try w.server(["root", "rotate", "--repo", w.repo, "--sign-with", r, "--remove-signing-key", Self.pub(s2),
                      "--add-signing-key", Self.pub(s3)])
        try w.publish(Self.version3, keys: [s3])
        try Data(try strangerRoot(3)).write(to: URL(fileURLWithPath: rootFile(3)))
        line = try await Self.waitForError(device, "root_refused")
        #expect(line.contains("root 3"))
        #expect(device.status()["version"] as? Int == 2 && Self.trust(device)["root_version"] as? Int == 2)
        let verify = try Binaries.run("cairn-server", ["verify", w.repo], in: w.folder)
        #expect(verify.status == 1 && verify.output.contains("3.root.json"))
    }

    @Test("Given an expired version newer than the installed one on a USB folder, then a device installs it flagged expired (cairn status saying so), and a device with expired_updates = refuse keeps its older one")
    func expiredButNewerFromUSB() async throws {
        let w = try Workspace()
        let r = try w.keygen("root"), s = try w.keygen("sign")
        try w.server(["root", "init", "--repo", w.repo, "--root-key", r, "--signing-key", Self.pub(s)])
        let pinned = try Self.pinnedRoot(w)
        try w.publish(Workspace.version1, keys: [s])
        let usb = "file://" + w.repo
        let taking = try DeviceProcess(w, sources: [usb], name: "taking", trust: ["--trusted-root", pinned])
        defer { taking.stop() }
        let refusing = try DeviceProcess(w, sources: [usb], name: "refusing", config: ["expired_updates": "refuse"],
                                         trust: ["--trusted-root", pinned])
        defer { refusing.stop() }
        try await taking.waitForVersion(1)
        try await refusing.waitForVersion(1)

        // Version 2 as it was published five weeks ago with the usual 30 days: the publisher's
        // manifest re-dated and signed with its key, as a stick made back then would carry it.
        try w.publish(Workspace.version2, keys: [s])
        let created = Timestamp(Date().addingTimeInterval(-35 * 86_400))!
        let expires = Timestamp(Date().addingTimeInterval(-5 * 86_400))!
        let old = try Self.redated(w, created: created.rfc3339, expires: expires.rfc3339, key: s, to: w.folder + "/old-v2.json")
        for path in [w.manifestPath, w.repo + "/channels/field/versions/2.json"] {
            try FileManager.default.removeItem(atPath: path)
            try FileManager.default.copyItem(atPath: old, toPath: path)
        }

        #expect(try taking.cairn(["sync"]).status == 0)
        try await taking.waitForVersion(2)
        let status = taking.status()
        #expect(status["expired"] as? Bool == true && status["expires"] as? String == expires.rfc3339)
        let answer = try JSONSerialization.jsonObject(with: Data(try taking.cairn(["query", "sandbags", "--json"]).output.utf8)) as! [String: Any]
        #expect(answer["expired"] as? Bool == true && answer["expires"] as? String == expires.rfc3339)
        #expect((taking.status()["sync"] as? [String: Any])?["expired_installs"] as? Int == 1)
        // Said as what is known on the device: it expired, and nothing newer was installed.
        let human = try taking.cairn(["status"]).output
        #expect(human.contains("expired     YES: the installed manifest expired at \(expires.rfc3339); no newer version has been installed"),
                "\(human)")
        #expect(taking.log.contains("installing expired version 2"))

        _ = try await Self.waitForError(refusing, "expired")
        #expect(refusing.status()["version"] as? Int == 1)
        // (The clock floor after a reset: CairnSyncTests/TrustSyncTests.clockSetBack.)
    }
}
