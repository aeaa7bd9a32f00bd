import CairnTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The main job with every part a real process: `cairn-server publish` and `serve` (or nginx),
/// `cairnd` syncing over HTTP and answering on its Unix socket, `cairn` asking. The tiny
/// random model keeps it fast; the flow is the same as with MiniLM (scripts/demo runs that).
@Suite("publish, serve, sync, query: real processes", .serialized)
struct DeviceFlowTests {
    static let version1 = PublishWorkspace.version1
    static let version2 = PublishWorkspace.version2

    typealias Workspace = PublishWorkspace

    /// A running cairnd and the `cairn` calls against its socket.
    final class DeviceProcess {
        let socket: String
        let process: Process
        let folder: String

        init(_ workspace: Workspace, source: String, name: String = "device") throws {
            folder = workspace.folder + "/" + name
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            socket = folder + "/cairnd.sock"
            process = try launch(Products.path("cairnd"),
                                 ["--source", source, "--channel", "field", "--trusted-key", workspace.publicKey,
                                  "--data-dir", folder + "/data", "--socket", socket, "--poll-interval", "3600"],
                                 logDirectory: folder)
        }

        func cairn(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
            try Binaries.run("cairn", ["--socket", socket] + arguments, in: folder)
        }

        func status() -> [String: Any] {
            guard let run = try? cairn(["status", "--json"]), run.status == 0 else { return [:] }
            return (try? JSONSerialization.jsonObject(with: Data(run.output.utf8))) as? [String: Any] ?? [:]
        }

        func waitForVersion(_ version: Int) async throws {
            try await waitUntil("cairnd serves version \(version)", seconds: 60) { status()["version"] as? Int == version }
        }

        func query(_ text: String) throws -> (version: Int, ids: [String], online: Bool) {
            let run = try cairn(["query", text, "-k", "4", "--json"])
            try #require(run.status == 0, "cairn query: \(run.error)")
            let answer = try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as! [String: Any]
            let ids = (answer["results"] as! [[String: Any]]).map { ($0["chunk"] as! [String: Any])["id"] as! String }
            return (answer["version"] as! Int, ids, answer["online"] as? Bool ?? false)
        }

        func stop() { stopProcess(process) }
    }

    /// Starts `cairn-server serve --port 0` and returns it with its URL and log path.
    static func serve(_ workspace: Workspace) async throws -> (Process, url: String, log: String) {
        try await workspace.serve()
    }

    @Test("Given a published channel served by cairn-server, when a device syncs, updates by delta and loses the network, then it always answers from one verified version")
    func publishServeSyncQuery() async throws {
        let workspace = try await Workspace.make()
        try await workspace.publish(Self.version1)
        let (server, url, serverLog) = try await Self.serve(workspace)
        defer { stopProcess(server) }
        let device = try DeviceProcess(workspace, source: url)
        defer { device.stop() }

        // Then version 1 is installed and answers from its own chunks.
        try await device.waitForVersion(1)
        let first = try device.query("boil water")
        #expect(first.version == 1 && first.ids.first == "boil")
        #expect(Set(first.ids).isSubset(of: Set(Self.version1.map(\.id))))

        // When version 2 is published and the device is told to sync, it takes the delta.
        try await workspace.publish(Self.version2)
        let blobs = try workspace.blobs()
        #expect(blobs.deltas.count == 1)
        #expect(try device.cairn(["sync"]).status == 0)
        try await device.waitForVersion(2)
        let second = try device.query("sandbags pyramid")
        #expect(second.version == 2 && second.ids.first == "sandbag")
        #expect(!second.ids.contains("storm"))
        let requests = (try? String(contentsOfFile: serverLog, encoding: .utf8)) ?? ""
        #expect(requests.contains(blobs.deltas[0]), "the device should have fetched the delta")
        #expect(!requests.contains(blobs.snapshot), "the device should not have fetched version 2's full snapshot")

        // When the network goes away, the device keeps answering, from version 2, offline.
        stopProcess(server)
        #expect(try device.cairn(["sync"]).status == 0)
        try await waitUntil("status says offline", seconds: 30) {
            (device.status()["sync"] as? [String: Any])?["online"] as? Bool == false
        }
        let offline = try device.query("crank radio")
        #expect(offline.version == 2 && offline.ids.first == "radio" && !offline.online)
    }

    @Test("Given the same repository on nginx, when a device syncs from it, then it installs and answers")
    func syncFromNginx() async throws {
        let workspace = try await Workspace.make()
        try await workspace.publish(Self.version1)
        try await workspace.publish(Self.version2)
        let nginx = try Nginx(root: workspace.repo)
        defer { nginx.stop() }
        let device = try DeviceProcess(workspace, source: nginx.url)
        defer { device.stop() }
        try await device.waitForVersion(2)
        #expect(try device.query("sandbags pyramid").ids.first == "sandbag")
        #expect(nginx.accessLog.contains { $0.contains("/channels/field/manifest.json") })
    }

    @Test("Given cairnd killed with SIGKILL at 30 random instants of a sync, when restarted each time, then it serves a verified version and finishes the sync")
    func killedDuringSyncRecovers() async throws {
        // A device data directory holding version 1, made once by a real sync and then copied
        // for each trial; the repository then gets version 2, which every trial races to.
        let workspace = try await Workspace.make()
        try await workspace.publish(Self.version1)
        let (server, url, _) = try await Self.serve(workspace)
        defer { stopProcess(server) }
        let started = ContinuousClock.now
        let seed = try DeviceProcess(workspace, source: url, name: "seed")
        try await seed.waitForVersion(1)
        // Kill instants are drawn over how long start-up plus a whole sync took here.
        let window = (ContinuousClock.now - started).components
        let windowMicroseconds = UInt32(max(50_000, window.seconds * 1_000_000 + window.attoseconds / 1_000_000_000_000))
        seed.stop()
        try await workspace.publish(Self.version2)

        var generator = SystemRandomNumberGenerator()
        var servedAtRestart: [Int: Int] = [:]
        var leftAtKill: [String: Int] = [:]
        var held = 0
        for trial in 0..<30 {
            let name = "trial-\(trial)"
            try FileManager.default.createDirectory(atPath: workspace.folder + "/" + name, withIntermediateDirectories: true)
            let copy = try Binaries.run("/bin/cp", ["-a", seed.folder + "/data", workspace.folder + "/" + name + "/data"],
                                        in: workspace.folder)
            try #require(copy.status == 0, "cp: \(copy.error)")
            let running = try DeviceProcess(workspace, source: url, name: name)
            // A random instant of start-up, manifest, download, apply or swap.
            usleep(UInt32.random(in: 0..<windowMicroseconds, using: &generator))
            kill(running.process.processIdentifier, SIGKILL)
            running.process.waitUntilExit()
            let installed = (try? FileManager.default.destinationOfSymbolicLink(atPath: running.folder + "/data/current")) ?? "?"
            leftAtKill[installed, default: 0] += 1

            // Restarted on the same data directory, it serves version 1 or 2 straight away,
            // answers from that version, and then completes the sync to 2.
            let restarted = try DeviceProcess(workspace, source: url, name: name)
            defer { restarted.stop() }
            try await waitUntil("trial \(trial): cairnd answers", seconds: 30) { restarted.status()["version"] is Int }
            let version = restarted.status()["version"] as? Int ?? 0
            #expect(version == 1 || version == 2, "trial \(trial): served version \(version)")
            let answer = try restarted.query("crank radio")
            let answered = [1, 2].contains(answer.version) && answer.ids.first == "radio"
            #expect(answered, "trial \(trial)")
            try await restarted.waitForVersion(2)
            servedAtRestart[version, default: 0] += 1
            if answered && [1, 2].contains(version) { held += 1 }
        }
        print("SIGKILL during sync: held \(held)/30 (current at the kill: \(leftAtKill.sorted { $0.key < $1.key }); first answer after restart: v1 \(servedAtRestart[1] ?? 0)×, v2 \(servedAtRestart[2] ?? 0)×)")
    }
}
