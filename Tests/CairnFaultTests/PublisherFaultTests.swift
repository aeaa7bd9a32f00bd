import CairnTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The publisher interrupted, raced or fed garbage: the repository must stay verifiable, and a
/// device syncing from it must only ever install whole, signed versions.
@Suite("Faults: publisher", .offCooperativePool, .serialized)
struct PublisherFaultTests {
    static func publishArguments(_ rig: Rig, source: String) -> [String] {
        ["publish", "--repo", rig.workspace.repo, "--channel", "field", "--source", source, "--key", rig.workspace.key,
         "--model-dir", rig.workspace.model, "--no-cache"]
    }

    static func source(_ rig: Rig, _ version: Int) throws -> String {
        let path = rig.workspace.folder + "/kb-\(UUID().uuidString).json"
        try Workspace.knowledgeBase(Rig.knowledgeBase(version), to: path)
        return path
    }

    /// The version a manifest file names (`manifest.json` or `versions/<n>.json`).
    static func version(inManifest path: String) throws -> Int {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let manifest = (try JSONSerialization.jsonObject(with: data) as! [String: Any])["manifest"] as! [String: Any]
        return manifest["version"] as! Int
    }

    /// nil when the channel's history is 1…n with no gap, each `versions/<k>.json` naming k, and
    /// `manifest.json` names n = `expected`; else what is wrong.
    static func historyIsIncreasing(_ rig: Rig, newest expected: Int) throws -> String? {
        let folder = rig.workspace.repo + "/channels/field/versions"
        let files = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") }
        let numbers = files.compactMap { Int($0.dropLast(5)) }.sorted()
        guard numbers.count == files.count, numbers == Array(1...max(1, expected)) else {
            return "versions/ holds \(files.sorted()), expected 1…\(expected)"
        }
        for number in numbers {
            let named = try version(inManifest: folder + "/\(number).json")
            if named != number { return "versions/\(number).json names version \(named)" }
        }
        let newest = try version(inManifest: rig.workspace.manifestPath)
        return newest == expected ? nil : "manifest.json names version \(newest), expected \(expected)"
    }

    /// nil when `cairn-server verify` passes and the device, synced, answers from the newest
    /// published version.
    static func repositoryHolds(_ rig: Rig) async throws -> String? {
        let verify = try Binaries.run("cairn-server", ["verify", rig.workspace.repo], in: rig.workspace.folder)
        guard verify.status == 0 else { return "verify failed: \(verify.error.suffix(200))" }
        let data = try Data(contentsOf: URL(fileURLWithPath: rig.workspace.manifestPath))
        let manifest = (try JSONSerialization.jsonObject(with: data) as! [String: Any])["manifest"] as! [String: Any]
        let newest = manifest["version"] as! Int
        if let outcome = try await rig.syncAttempt() { return "sync: \(outcome.code): \(outcome.message)" }
        let answer = try rig.device.query("release notes edition", mode: "lexical")
        return answer.version == newest && answer.ids.count == 1 && answer.ids[0].hasPrefix("release-")
            ? nil : "expected version \(newest) and one release chunk, got \(answer)"
    }

    @Test("Given publishes killed at random instants, then the repository verifies and the device installs only whole versions")
    func killedMidPublish() async throws {
        let rig = try await Rig()
        defer { rig.stop() }
        // How long one publish takes here, to draw kill instants from.
        let started = ContinuousClock.now
        try rig.publishNext()
        let took = (ContinuousClock.now - started).components
        let window = UInt32(max(20_000, took.seconds * 1_000_000 + took.attoseconds / 1_000_000_000_000))
        let report = FaultReport("publish killed at a random instant")
        for number in 1...6 {
            await report.trial(number) {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: Products.path("cairn-server"))
                process.arguments = Self.publishArguments(rig, source: try Self.source(rig, rig.version + 1))
                process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
                process.standardError = FileHandle(forWritingAtPath: "/dev/null")
                try process.spawn()
                usleep(UInt32.random(in: 0..<window))
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                return try await Self.repositoryHolds(rig)
            }
        }
        #expect(report.finish("repository verifies, device on the newest whole version"))
    }

    @Test("Given two publishes started together, then one waits or refuses, and versions stay strictly increasing")
    func racingPublishes() async throws {
        let rig = try await Rig()
        defer { rig.stop() }
        let report = FaultReport("two publishes at once")
        var outcomes: [String] = []
        for number in 1...3 {
            await report.trial(number) {
                let sources = [try Self.source(rig, 100 + number), try Self.source(rig, 200 + number)]
                let before = try Self.version(inManifest: rig.workspace.manifestPath)
                async let first = run(Products.path("cairn-server"), Self.publishArguments(rig, source: sources[0]))
                async let second = run(Products.path("cairn-server"), Self.publishArguments(rig, source: sources[1]))
                let finished = try await [first, second]
                let failed = finished.filter { $0.status != 0 }
                outcomes.append(failed.isEmpty ? "both published" : "one refused")
                if failed.count == 2 { return "both failed: \(failed.map(\.stderr))" }
                if let refusal = failed.first, refusal.stderr.split(separator: "\n").count != 1 {
                    return "the refusal is not one line: \(refusal.stderr)"
                }
                // Strictly increasing: each publish that succeeded took the next number, none
                // was reused or skipped, and the manifest names the last.
                if let problem = try Self.historyIsIncreasing(rig, newest: before + finished.count - failed.count) {
                    return problem
                }
                return try await Self.repositoryHolds(rig)
            }
        }
        #expect(report.finish("\(Dictionary(grouping: outcomes) { $0 }.map { "\($0.key) \($0.value.count)×" }.sorted().joined(separator: ", ")); repository verifies"))
    }

    @Test("Given malformed sources, then publish exits non-zero with one line and the repository is unchanged")
    func malformedSource() async throws {
        let rig = try await Rig()
        defer { rig.stop() }
        let folder = rig.workspace.folder
        let cases: [(String, [UInt8])] = [
            ("truncated JSON", Array(#"[{"id": "a", "title": "t", "content": "#.utf8)),
            ("binary garbage", (0..<2048).map { _ in UInt8.random(in: 0...255) }),
            ("records without content", Array(#"[{"id": "a"}, {"id": "b"}]"#.utf8)),
            ("duplicate ids", Array(#"[{"id": "a", "title": "t", "content": "x"}, {"id": "a", "title": "t", "content": "y"}]"#.utf8)),
        ]
        let report = FaultReport("malformed publisher source")
        for (number, (name, bytes)) in cases.enumerated() {
            await report.trial(number + 1) {
                let path = folder + "/bad-\(number).json"
                try Data(bytes).write(to: URL(fileURLWithPath: path))
                let before = try Data(contentsOf: URL(fileURLWithPath: rig.workspace.manifestPath))
                let publish = try await run(Products.path("cairn-server"), Self.publishArguments(rig, source: path))
                guard publish.status != 0 else { return "\(name) was published" }
                let lines = publish.stderr.split(separator: "\n")
                guard lines.count == 1 else { return "\(name): not one line: \(publish.stderr.prefix(300))" }
                guard try Data(contentsOf: URL(fileURLWithPath: rig.workspace.manifestPath)) == before else { return "\(name) changed the manifest" }
                return rig.wrongAnswer(expecting: 1)
            }
        }
        #expect(report.finish("exit ≠ 0 with one line, manifest unchanged, device answering"))
    }
}
