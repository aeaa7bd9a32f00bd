import CairnCore
import CairnStore
import CairnTestSupport
import Foundation
import Testing

/// Faults on the wire between cairnd and its source, produced by the real fault server
/// (Fixtures/fault_server.py) and real process kills. In every trial the device is on version
/// n-1, version n is published, the fault is injected and a sync is asked for: the attempt must
/// fail with the right code and a one-line status, n-1 must keep answering, and once the fault
/// is gone the next attempt must install n.
@Suite("Faults: network", .offCooperativePool, .serialized)
struct NetworkFaultTests {
    static let config = ["stall_timeout": "2"]

    /// One trial of `fault` on `rig`: refused with one of `codes`, then recovers.
    static func trial(_ rig: Rig, codes: Set<String>, fault: [String: Any]) async throws -> String? {
        try await trial(rig, codes: codes) { fault }
    }

    /// The same, with the fault made once the new version is published (to fit its blobs).
    /// `saying`: words the refusal's message must hold. `kept`: the fault stays for the
    /// recovery (a cache that keeps what it holds; the device's next requests get past it).
    static func trial(_ rig: Rig, codes: Set<String>, saying: String? = nil, kept: Bool = false,
                      fault: () throws -> [String: Any]) async throws -> String? {
        let old = rig.version
        let new = try rig.publishNext()
        try rig.server.set(try fault())
        var during: String?
        let outcome = try await rig.syncAttempt { during = rig.wrongAnswer(expecting: old) }
        if let during { return "while the attempt ran: \(during)" }
        if let problem = rig.refusal(outcome, codes: codes, old: old) { return problem }
        if let saying, outcome?.message.contains(saying) != true { return "the refusal does not say \"\(saying)\": \(String(describing: outcome))" }
        if !kept { try rig.server.clear() }
        return try await rig.recovery(to: new)
    }

    @Test("Given connections cut at random byte offsets of the blobs, then each attempt fails as network and the next resumes")
    func cutAtRandomOffsets() async throws {
        let rig = try await Rig(config: Self.config)
        defer { rig.stop() }
        let report = FaultReport("connection cut at a random byte offset")
        var offsets: [Int] = []
        for number in 1...8 {
            await report.trial(number) {
                let old = rig.version
                let new = try rig.publishNext()
                // Below the size of every blob of the new version, so each one fetched is cut.
                let smallest = try rig.currentBlobs().map(\.size).min() ?? 2
                let offset = Int.random(in: 1..<max(2, smallest))
                offsets.append(offset)
                try rig.server.set(["cut_after": offset])
                var during: String?
                let outcome = try await rig.syncAttempt { during = rig.wrongAnswer(expecting: old) }
                if let during { return "while the attempt ran: \(during)" }
                if let problem = rig.refusal(outcome, codes: ["network"], old: old) { return problem }
                try rig.server.clear()
                // This trial's next attempt resumes: it asks for the rest of a cut blob with a
                // Range request and gets 206, and then installs.
                let seen = rig.server.requests.count
                if let problem = try await rig.recovery(to: new) { return problem }
                let resumed = rig.server.requests.dropFirst(seen).filter { $0.range != "-" && $0.status == 206 }
                return resumed.isEmpty ? "the next attempt did not resume (no 206 to a Range request)" : nil
            }
        }
        #expect(report.finish("network error, old version answering, each next attempt resumed with Range; offsets \(offsets.sorted())"))
        #expect(rig.server.requests.contains { $0.status == 206 }, "no download resumed with a Range request")
    }

    @Test("Given a delta cut mid-download, or before its first byte (the link down once the manifest came), then the attempt fails as network without asking for the snapshot (the spare kept), and the next attempt resumes the delta (or asks for it again) and installs by it; cut before its first byte three attempts in a row, the third tries the snapshot",
          arguments: [true, false])
    func cutDeltaDoesNotFallBack(midway: Bool) async throws {
        let rig = try await Rig(config: Self.config.merging(["spare_index_min_bytes": "0"]) { $1 })
        defer { rig.stop() }
        try await waitUntil("the spare is kept") { rig.device.syncStatus["spare"] as? String == "ready" }
        let old = rig.version
        let new = try rig.publishNext(bulk: 100_000)
        let manifest = try rig.currentManifest()
        let delta = try #require(manifest.deltas.first { $0.fromVersion == old })
        let snapshot = manifest.snapshot.sha256.hex
        // Before 2026-12-07 a cut before the first byte fell back to the snapshot, making room
        // for it (the spare, the previous version) over a link that had just gone down.
        try rig.server.set(["cut_after": midway ? delta.size / 2 : 0])
        let seen = rig.server.requests.count
        let outcome = try await rig.syncAttempt()
        #expect(outcome?.code == "network", "\(String(describing: outcome))")
        let asked = rig.server.requests.dropFirst(seen).map(\.path)
        #expect(asked.contains { $0.contains(delta.sha256.hex) } && !asked.contains { $0.contains(snapshot) }, "\(asked)")
        #expect(rig.device.syncStatus["spare"] as? String == "ready", "\(rig.device.syncStatus)")
        // Half the delta held: the next attempt comes after the shortest back-off, not a
        // doubled one (until 2026-12-07 every failure doubled it, progress or not).
        #expect(rig.device.log.contains("its download advanced; the next comes after the shortest back-off") == midway,
                "\(rig.device.log.suffix(2_000))")
        if !midway {
            // Failing there every time is the delta's (a server that resets that one file): the
            // third attempt in a row tries the snapshot.
            let second = rig.server.requests.count
            _ = try await rig.syncAttempt()
            #expect(!rig.server.requests.dropFirst(second).contains { $0.path.contains(snapshot) })
            let third = rig.server.requests.count
            _ = try await rig.syncAttempt()
            #expect(rig.server.requests.dropFirst(third).contains { $0.path.contains(snapshot) })
        }
        try rig.server.clear()
        let again = rig.server.requests.count
        if let problem = try await rig.recovery(to: new) { Issue.record("\(problem)") }
        let resumed = rig.server.requests.dropFirst(again)
        #expect(resumed.contains { $0.path.contains(delta.sha256.hex) && $0.status == (midway ? 206 : 200) }
                && !resumed.contains { $0.path.contains(snapshot) },
                "\(resumed.map(\.path))")
    }

    @Test("Given a mirror that holds the delta cut short (an interrupted copy), then its answer is refused before a byte is kept (its length is not the delta's) and the same attempt falls back to the snapshot and installs")
    func deltaHeldCutShortFallsBack() async throws {
        let rig = try await Rig(config: Self.config)
        defer { rig.stop() }
        let old = rig.version
        let new = try rig.publishNext(bulk: 100_000)
        let manifest = try rig.currentManifest()
        let delta = try #require(manifest.deltas.first { $0.fromVersion == old })
        let hex = delta.sha256.hex, snapshot = manifest.snapshot.sha256.hex
        let file = rig.workspace.repo + "/blobs/sha256/\(hex.prefix(2))/\(hex)"
        #expect(truncate(file, off_t(delta.size / 2)) == 0)
        let seen = rig.server.requests.count
        // Before 2026-12-06 the half was kept and resumed, and only the next attempt, which
        // added nothing to it, fell back.
        if let problem = try await rig.recovery(to: new) { Issue.record("\(problem)") }
        let requests = rig.server.requests.dropFirst(seen)
        #expect(requests.contains { $0.path.contains(snapshot) && $0.status == 200 })
        #expect(requests.filter { $0.path.contains(hex) }.count == 1, "\(requests.map(\.path))")
        #expect(rig.device.log.contains("not the blob (an error or captive-portal page?)"))
    }

    @Test("Given a device pinned to a root and a host that answers every missing path with its web page and 200 (a single-page site's fallback), when the next version is published, then the page is taken as no next root and the version installs, not refused as root_refused at every attempt")
    func missingRootAnsweredWithAPage() async throws {
        let rig = try await Rig(config: Self.config, rootPinned: true)
        defer { rig.stop() }
        try rig.server.set(["missing_page": true])
        let new = try rig.publishNext()
        let seen = rig.server.requests.count
        if let problem = try await rig.recovery(to: new) { Issue.record("\(problem)") }
        #expect(rig.server.requests.dropFirst(seen).contains { $0.path.hasSuffix("/root/2.root.json") && $0.status == 200 })
        #expect(rig.device.log.contains("answered root 2 with a web page: taken as no root 2"))
        // Said once, not at every poll for as long as the host answers so.
        #expect(try await rig.syncAttempt() == nil)
        #expect(rig.device.log.components(separatedBy: "answered root 2 with a web page").count - 1 == 1, "\(rig.device.log)")
    }

    @Test("Given a source that answers every blob with an HTML page, when the delta is refused and the snapshot too, then the spare the delta would have used is the same file after the attempt, not removed and copied again")
    func refusedFallbackKeepsTheSpare() async throws {
        let rig = try await Rig(config: Self.config.merging(["spare_index_min_bytes": "0"]) { $1 })
        defer { rig.stop() }
        try await waitUntil("the spare is kept") { rig.device.syncStatus["spare"] as? String == "ready" }
        let spare = rig.device.dataDirectory + "/versions/\(rig.version)/spare.sqlite"
        var before = stat()
        #expect(stat(spare, &before) == 0)
        let new = try rig.publishNext()
        try rig.server.set(["html": true])
        let seen = rig.server.requests.count
        let outcome = try await rig.syncAttempt()
        #expect(outcome?.code == "http_status", "\(String(describing: outcome))")
        let snapshot = try rig.currentManifest().snapshot.sha256.hex
        #expect(rig.server.requests.dropFirst(seen).contains { $0.path.contains(snapshot) }, "the snapshot was not asked for")
        var after = stat()
        // The same inode and change time: a file of the same number made again would have a new one.
        #expect(stat(spare, &after) == 0 && after.st_ino == before.st_ino && after.st_ctim.tv_sec == before.st_ctim.tv_sec
                && after.st_ctim.tv_nsec == before.st_ctim.tv_nsec, "the spare was removed (and copied again)")
        try rig.server.clear()
        if let problem = try await rig.recovery(to: new) { Issue.record("\(problem)") }
    }

    @Test("Given a source that stalls, answers 500, announces wrong lengths or serves HTML, then each attempt is refused and the next succeeds")
    func badAnswers() async throws {
        let rig = try await Rig(config: Self.config)
        defer { rig.stop() }
        let cases: [(name: String, codes: Set<String>, fault: [String: Any], what: String)] = [
            ("source stalls mid-blob", ["network"], ["stall_after": 100], "low-speed limit fired"),
            ("source answers 500", ["http_status"], ["status": 500], "http_status"),
            // A length that is not the blob's is refused before a byte is kept (since 2026-12-06;
            // before, the bytes went into the partial, for the next source to resume and fail).
            ("Content-Length too long", ["http_status"], ["length_delta": 100], "refused before writing"),
            ("Content-Length too short", ["http_status"], ["length_delta": -100], "refused before writing"),
            ("HTML instead of a blob", ["http_status"], ["html": true], "refused before writing"),
        ]
        for fault in cases {
            let report = FaultReport(fault.name)
            for number in 1...2 {
                await report.trial(number) { try await Self.trial(rig, codes: fault.codes, fault: fault.fault) }
            }
            #expect(report.finish("\(fault.what), old version answering, next attempt installs"))
        }
    }

    @Test("Given a proxy that compresses blobs on the way (Content-Encoding: gzip) although cairnd asks for them as published, then the attempt is refused as http_status saying so, the old version answers, the source is not taken for a corrupt one, and without the proxy the next attempt installs")
    func compressedOnTheWay() async throws {
        let rig = try await Rig(config: Self.config)
        defer { rig.stop() }
        let old = rig.version
        let new = try rig.publishNext()
        try rig.server.set(["gzip": true])
        let outcome = try await rig.syncAttempt()
        #expect(outcome?.code == "http_status" && outcome?.message.contains("compressed (Content-Encoding: gzip)") == true,
                "\(String(describing: outcome))")
        #expect(rig.wrongAnswer(expecting: old) == nil)
        let sources = rig.device.state["sources"] as? [[String: Any]] ?? []
        #expect(sources.allSatisfy { $0["last_hash_mismatch"] == nil || $0["last_hash_mismatch"] is NSNull }, "\(sources)")
        try rig.server.clear()
        if let problem = try await rig.recovery(to: new) { Issue.record("\(problem)") }
    }

    @Test("Given a cache in front of the source that holds a damaged copy of every blob and checks it with the origin only when a request asks (Cache-Control: no-cache), then the first attempt is refused as hash_mismatch saying so, the old version answers, and the next attempt asks for those blobs again that way and installs")
    func damagedCopyInACache() async throws {
        let rig = try await Rig(config: Self.config)
        defer { rig.stop() }
        // The cache keeps its damaged copy: only a request that asks it to revalidate gets the blob.
        if let problem = try await Self.trial(rig, codes: ["hash_mismatch"], saying: "asks caches to revalidate", kept: true,
                                              fault: { ["cached_corrupt": true] }) { Issue.record("\(problem)") }
    }

    @Test("Given a cache in front of the source that still holds version 2's manifest after version 3 is installed and version 4 published, and checks it with the origin only when a request asks (Cache-Control: no-cache), then the attempt is refused as a rollback saying the source may be behind, version 3 answers, and the next attempt asks for the manifest that way and installs version 4")
    func manifestBehindInACache() async throws {
        let rig = try await Rig(config: Self.config)
        defer { rig.stop() }
        _ = try rig.publishNext()
        let older = rig.workspace.manifestPath + ".2"
        try FileManager.default.copyItem(atPath: rig.workspace.manifestPath, toPath: older)
        let installed = try rig.publishNext()
        if let problem = try await rig.recovery(to: installed) { Issue.record("\(problem)") }
        // The cache keeps version 2's manifest: only a request that asks it to revalidate gets version 4's.
        if let problem = try await Self.trial(rig, codes: ["rollback"], saying: "serves version 2, older than the installed 3: a copy or cache that is behind",
                                              kept: true, fault: { ["cached_files": ["/channels/field/manifest.json": older]] }) {
            Issue.record("\(problem)")
        }
    }

    @Test("Given a cache in front of the source that answers 404 for every blob of the new version (kept from before it was published) and checks with the origin only when a request asks (Cache-Control: no-cache), then the attempt fails as http_status, the old version answers, and the next attempt asks for those blobs that way and installs")
    func notFoundKeptInACache() async throws {
        let rig = try await Rig(config: Self.config)
        defer { rig.stop() }
        // The cache keeps its 404s: only a request that asks it to revalidate gets a blob.
        if let problem = try await Self.trial(rig, codes: ["http_status"], saying: "404", kept: true,
                                              fault: { ["cached_missing": true] }) { Issue.record("\(problem)") }
    }

    @Test("Given the source killed in the middle of a blob download, then the attempt fails, and once it is back the download resumes")
    func serverKilledMidDownload() async throws {
        let rig = try await Rig(config: Self.config)
        defer { rig.stop() }
        let report = FaultReport("server killed mid-download")
        for number in 1...3 {
            await report.trial(number) {
                let old = rig.version
                let new = try rig.publishNext()
                // The server sends a blob's first 64 bytes, then holds the rest until it is
                // killed (a rate left a small delta time to arrive whole before the kill).
                try rig.server.set(["hold_after": 64])
                let staging = rig.device.dataDirectory + "/staging"
                let outcome = try await rig.syncAttempt {
                    // Kill the server once the device holds part of a blob.
                    _ = eventually(within: 30) {
                        let files = (try? FileManager.default.contentsOfDirectory(atPath: staging)) ?? []
                        return files.contains { (try? FileManager.default.attributesOfItem(atPath: staging + "/" + $0)[.size] as? Int ?? 0) ?? 0 > 0 }
                    }
                    rig.server.kill()
                }
                if let problem = rig.refusal(outcome, codes: ["network"], old: old) { return problem }
                try rig.server.clear()
                try rig.server.restart()
                // This trial's download resumes: a Range request answered 206, then the install.
                let seen = rig.server.requests.count
                if let problem = try await rig.recovery(to: new) { return problem }
                let resumed = rig.server.requests.dropFirst(seen).filter { $0.range != "-" && $0.status == 206 }
                return resumed.isEmpty ? "the download did not resume after the restart (no 206 to a Range request)" : nil
            }
        }
        let resumed = rig.server.requests.filter { $0.range != "-" && $0.status == 206 }.count
        #expect(report.finish("network error, old version answering; \(resumed) blob downloads resumed after restart"))
        #expect(resumed > 0)
    }

    @Test("Given a source whose host does not resolve, then the device fails over to the next source, and with only that source it stays on its version")
    func dnsFailure() async throws {
        let rig = try await Rig(config: Self.config)
        defer { rig.stop() }
        rig.device.stop()
        let report = FaultReport("DNS failure")
        let unresolvable = "http://cairn-no-such-host.invalid/"
        // Only the unresolvable source: refused as network, offline, the version answers.
        let alone = try DeviceProcess(rig.workspace, sources: [unresolvable], name: "dns-alone",
                                      dataDirectory: rig.device.dataDirectory)
        await report.trial(1) {
            defer { alone.stop() }
            try await waitUntil("cairnd answers", seconds: 30) { alone.status()["version"] is Int }
            let new = try rig.publishNext()
            _ = new
            let before = alone.attemptsFinished
            _ = try alone.cairn(["sync"])
            try await waitUntil("the attempt ends", seconds: 60) { alone.attemptsFinished > before }
            guard alone.lastErrorCode == "network" else { return "error \(String(describing: alone.lastErrorCode))" }
            guard alone.syncStatus["online"] as? Bool == false else { return "status does not say offline" }
            let answer = try alone.query("release notes edition", mode: "lexical")
            return answer.version == 1 && answer.ids == ["release-1"] ? nil : "answered \(answer)"
        }
        // The unresolvable source first, the good one second: the device fails over.
        let both = try DeviceProcess(rig.workspace, sources: [unresolvable, rig.server.url], name: "dns-failover",
                                     dataDirectory: rig.device.dataDirectory)
        await report.trial(2) {
            defer { both.stop() }
            try await both.waitForVersion(rig.version)
            let sources = both.syncStatus["sources"] as? [[String: Any]] ?? []
            let dns = sources.first { $0["url"] as? String == unresolvable }
            guard (dns?["last_error"] as? String)?.hasPrefix("network") == true else { return "no DNS error recorded: \(sources)" }
            let answer = try both.query("release notes edition", mode: "lexical")
            return answer.ids == ["release-\(rig.version)"] ? nil : "answered \(answer)"
        }
        #expect(report.finish("alone: network error, offline, old version answering; with a second source: failed over"))
    }

    @Test("Given every source down for many polls, then cairnd backs off, says offline, keeps its last success, and resumes when the source returns")
    func allSourcesDownLong() async throws {
        let rig = try await Rig(config: Self.config)
        defer { rig.stop() }
        rig.device.stop()
        // Back-off from 2 s doubling to 4 s, past the 1 s poll interval: a device that kept
        // polling at its interval would space its attempts 1 s apart, below every minimum.
        // (Each attempt must be seen on its own: a test starved for longer than the shortest
        // back-off would miss one. From 0.5 s, a loaded 2-core run's `cairn status` processes
        // could not look twice inside it.)
        let backoff = (minimum: 2.0, maximum: 4.0)
        let device = try DeviceProcess(rig.workspace, sources: [rig.server.url], name: "long-down",
                                       config: ["backoff_min": "\(backoff.minimum)", "backoff_max": "\(backoff.maximum)"],
                                       dataDirectory: rig.device.dataDirectory, pollInterval: 1)
        defer { device.stop() }
        let report = FaultReport("all sources down for many polls")
        var spacings: [String] = []
        await report.trial(1) {
            try await waitUntil("cairnd answers", seconds: 30) { device.status()["version"] as? Int == 1 }
            let lastSuccess = device.state["last_success"] as? String
            rig.server.kill()
            let before = device.attemptsFinished
            // Each attempt as status shows it once ended: its number, the source's failures in a
            // row, and when the test first saw it. A look is stamped after the read, so it is
            // never early, and late by at most two pauses between looks.
            var seen: [(attempt: Int, failures: Int, at: ContinuousClock.Instant)] = []
            var widestPause = Duration.zero, lastLook = ContinuousClock.now
            try await waitUntil("ten failed polls", seconds: 180) {
                let sync = device.syncStatus
                let now = ContinuousClock.now
                widestPause = max(widestPause, now - lastLook)
                lastLook = now
                let attempt = sync["attempts_finished"] as? Int ?? 0
                let failures = (sync["sources"] as? [[String: Any]])?.first?["failures_in_a_row"] as? Int ?? 0
                if attempt > before, attempt != seen.last?.attempt { seen.append((attempt, failures, now)) }
                return attempt >= before + 10
            }
            // Backs off: after the j-th failure in a row the next attempt waits at least
            // min·2^(j-1) capped at max, less the 10 % jitter (PollSchedule).
            var checked: Set<Int> = []
            for (earlier, later) in zip(seen, seen.dropFirst())
            where later.attempt == earlier.attempt + 1 && earlier.failures >= 1 && later.failures == earlier.failures + 1 {
                let base = min(backoff.minimum * Double(1 << min(earlier.failures - 1, 20)), backoff.maximum)
                let spacing = later.at - earlier.at
                spacings.append(String(format: "%.2f", Double(spacing.components.attoseconds) / 1e18 + Double(spacing.components.seconds)))
                if spacing < .seconds(0.9 * base) - widestPause * 2 {
                    return "attempt \(later.attempt) came \(spacing) after failure \(earlier.failures), before its back-off of \(0.9 * base) s"
                }
                checked.insert(earlier.failures)
            }
            guard checked.isSuperset(of: 1...5) else { return "back-off not measured after failures 1…5 (measured after \(checked.sorted()))" }
            let sync = device.syncStatus
            guard sync["online"] as? Bool == false else { return "status does not say offline: \(sync)" }
            guard device.state["last_success"] as? String == lastSuccess else { return "last success changed" }
            guard device.lastErrorCode == "network" else { return "error \(String(describing: device.lastErrorCode))" }
            let answer = try device.query("release notes edition", mode: "lexical")
            guard answer.version == 1, answer.ids == ["release-1"], !answer.online else { return "answered \(answer)" }
            // Back: the next poll (no `cairn sync`) installs the new version.
            let new = try rig.publishNext()
            try rig.server.restart()
            try await device.waitForVersion(new)
            return device.syncStatus["online"] as? Bool == true ? nil : "status does not say online again"
        }
        let polls = device.attemptsFinished
        #expect(report.finish("\(polls) polls, spaced \(spacings.joined(separator: ", ")) s by back-off, offline, last success kept, resumed by itself"))
    }

    @Test("Given a first source whose blobs fail their SHA-256 (a stale or corrupt mirror) and a good second one, when a version installs from the second, then the next version is asked of the second first and the first is not asked at all")
    func corruptMirrorTriedLast() async throws {
        let workspace = try Workspace()
        try workspace.publish(Rig.knowledgeBase(1))
        let mirror = try FaultServer(root: workspace.repo, ["--corrupt"])
        defer { mirror.stop() }
        let origin = try FaultServer(root: workspace.repo)
        defer { origin.stop() }
        let device = try DeviceProcess(workspace, sources: [mirror.url, origin.url], name: "mirrored")
        defer { device.stop() }
        try await device.waitForVersion(1)
        #expect(mirror.requests.contains { $0.path.contains("/blobs/") }, "the mirror was asked first for version 1")
        let sources = device.state["sources"] as? [[String: Any]] ?? []
        #expect(sources.first { $0["url"] as? String == mirror.url }?["last_hash_mismatch"] is String, "\(sources)")

        try workspace.publish(Rig.knowledgeBase(2))
        let asked = mirror.requests.count
        let waited = try device.cairn(["sync", "--wait"])
        #expect(waited.status == 0, "\(waited.error)")
        try await device.waitForVersion(2)
        #expect(mirror.requests.count == asked, "the mirror was asked again: \(mirror.requests.dropFirst(asked).map(\.path))")
    }

    /// Version 1 came from the first source before the second was asked, so the second is asked
    /// at once in an attempt of its own: waits for it to end, which must come before version 2
    /// exists, or that attempt may take version 2 from the second source first.
    static func secondSourceAsked(_ device: DeviceProcess) async throws {
        try await waitUntil("the attempt that asks the second source ends") {
            let sync = device.syncStatus
            return (sync["attempts_finished"] as? Int ?? 0) >= 2 && sync["progress"] is NSNull
        }
    }

    /// Two fault servers over one repository and a device syncing from both in order, which
    /// cuts a blob download under 8 KiB/s over 1 s while a later source remains. Once version 1
    /// serves, version 2 is published with `bulk` bytes of random words more: `body` gets both
    /// servers, the device and version 2's delta from version 1.
    private static func twoSources(_ name: String, bulk: Int,
                                   _ body: (FaultServer, FaultServer, DeviceProcess, ContentID) async throws -> Void) async throws {
        let workspace = try Workspace()
        try workspace.publish(Rig.knowledgeBase(1))
        let first = try FaultServer(root: workspace.repo)
        defer { first.stop() }
        let second = try FaultServer(root: workspace.repo)
        defer { second.stop() }
        let device = try DeviceProcess(workspace, sources: [first.url, second.url], name: name,
                                       config: ["slow_source_rate": "8192", "slow_source_window": "1"])
        defer { device.stop() }
        try await device.waitForVersion(1)
        // Else it starts version 2's download before `body` sets its faults.
        try await Self.secondSourceAsked(device)
        try workspace.publish(Rig.knowledgeBase(2) + [("bulk", Rig.randomWords(bytes: bulk))])
        let manifest = try workspace.currentManifest()
        try await body(first, second, device, try #require(manifest.deltas.first { $0.fromVersion == 1 }).sha256)
    }

    @Test("Given a first source that sends blobs under slow_source_rate and a second that does not, then the delta is cut at the first after one window, the second resumes it from the bytes held, and the version installs by the delta, the snapshot never asked for")
    func slowMirrorHandsOver() async throws {
        try await Self.twoSources("slow-mirror", bulk: 100_000) { mirror, origin, device, delta in
            try mirror.set(["rate": 2000])
            let (mirrorSeen, originSeen) = (mirror.requests.count, origin.requests.count)
            let waited = try device.cairn(["sync", "--wait"])
            #expect(waited.status == 0, "\(waited.error)")
            try await device.waitForVersion(2)
            // The mirror logs a request cut off when its next write fails (a tenth of a second
            // at this rate): maybe after the origin has served the rest.
            try await waitUntil("the mirror logs the request cut off", seconds: 30) {
                mirror.requests.dropFirst(mirrorSeen).contains { $0.path.contains("/blobs/") }
            }
            let slow = mirror.requests.dropFirst(mirrorSeen).filter { $0.path.contains("/blobs/") }
            let fast = origin.requests.dropFirst(originSeen).filter { $0.path.contains("/blobs/") }
            #expect(slow.count == 1 && slow[0].path.contains(delta.hex), "\(slow)")
            let resumedFrom = fast.first.flatMap { Int($0.range.dropFirst("bytes=".count).prefix { $0.isNumber }) } ?? 0
            #expect(fast.count == 1 && fast[0].path.contains(delta.hex) && fast[0].status == 206 && resumedFrom > 0, "\(fast)")
            #expect(device.log.contains("under slow_source_rate"), "\(device.log)")
        }
    }

    @Test("Given a first source cut under slow_source_rate and a second also under it but faster, then the second is not cut (the slow one, asked again after it, is no later source to take over) and the version installs from it")
    func fasterSecondSourceNotCut() async throws {
        try await Self.twoSources("slow-then-slowish", bulk: 60_000) { slow, slowish, device, delta in
            try slow.set(["rate": 2000])
            try slowish.set(["rate": 6000])
            let (slowSeen, slowishSeen) = (slow.requests.count, slowish.requests.count)
            let waited = try device.cairn(["sync", "--wait"])
            #expect(waited.status == 0, "\(waited.error)")
            try await device.waitForVersion(2)
            let cuts = device.log.split(separator: "\n").filter { $0.contains("under slow_source_rate") }
            #expect(cuts.count == 1, "\(cuts)")
            #expect(slow.requests.dropFirst(slowSeen).filter { $0.path.contains(delta.hex) }.count == 1)
            let second = slowish.requests.dropFirst(slowishSeen).filter { $0.path.contains(delta.hex) }
            #expect(second.count == 1 && second[0].status == 206, "\(second)")
        }
    }

    @Test("Given a mirror that copies snapshots only (no deltas) before the origin, then the delta the mirror lacks comes from the origin, the mirror's snapshot never asked for; with the origin down, the mirror, asked again, gives its snapshot in the same attempt")
    func deltaFromTheNextSource() async throws {
        let workspace = try Workspace()
        try workspace.publish(Rig.knowledgeBase(1))
        let copy = try TemporaryDirectory.make() + "/mirror"
        /// The repository as the mirror copies it: every file but the deltas of `version`.
        func mirror(version: Int) throws -> (delta: String, snapshot: String) {
            try? FileManager.default.removeItem(atPath: copy)
            try FileManager.default.copyItem(atPath: workspace.repo, toPath: copy)
            let manifest = try workspace.currentManifest()
            for delta in manifest.deltas {
                try FileManager.default.removeItem(atPath: copy + "/" + BlobStore.relativePath(of: delta.sha256))
            }
            return (manifest.deltas.first { $0.fromVersion == version - 1 }?.sha256.hex ?? "none", manifest.snapshot.sha256.hex)
        }
        _ = try mirror(version: 1)
        let mirrorServer = try FaultServer(root: copy)
        defer { mirrorServer.stop() }
        let origin = try FaultServer(root: workspace.repo)
        defer { origin.stop() }
        let device = try DeviceProcess(workspace, sources: [mirrorServer.url, origin.url], name: "snapshot-mirror")
        defer { device.stop() }
        try await device.waitForVersion(1)
        // Else it may install version 2 from the origin before the mirror holds it.
        try await Self.secondSourceAsked(device)

        try workspace.publish(Rig.knowledgeBase(2))
        let two = try mirror(version: 2)
        var (mirrorSeen, originSeen) = (mirrorServer.requests.count, origin.requests.count)
        #expect(try device.cairn(["sync", "--wait"]).status == 0)
        try await device.waitForVersion(2)
        let mirrored = mirrorServer.requests.dropFirst(mirrorSeen).filter { $0.path.contains("/blobs/") }
        // Before 2026-12-06 the mirror's 404 for the delta made it send its snapshot instead.
        #expect(mirrored.map(\.status) == [404] && mirrored[0].path.contains(two.delta), "\(mirrored)")
        #expect(origin.requests.dropFirst(originSeen).contains { $0.path.contains(two.delta) && $0.status == 200 })
        // Handing the delta over is no failure of the mirror's (before 2026-12-06 it counted one).
        let health = (device.state["sources"] as? [[String: Any]])?.first { $0["url"] as? String == mirrorServer.url }
        #expect(health?["consecutive_failures"] as? Int == 0, "\(String(describing: health))")

        try workspace.publish(Rig.knowledgeBase(3))
        let three = try mirror(version: 3)
        try origin.set(["status": 500])
        (mirrorSeen, originSeen) = (mirrorServer.requests.count, origin.requests.count)
        #expect(try device.cairn(["sync", "--wait"]).status == 0)
        try await device.waitForVersion(3)
        let again = mirrorServer.requests.dropFirst(mirrorSeen).filter { $0.path.contains("/blobs/") }
        #expect(again.filter { $0.path.contains(three.delta) }.count == 2 && again.contains { $0.path.contains(three.snapshot) && $0.status == 200 },
                "\(again)")

        // Neither holds the delta: the snapshot comes from the first source, as configured, not
        // from the last one asked (before 2026-12-06 the origin's, asked last, came at once).
        try workspace.publish(Rig.knowledgeBase(4))
        let four = try mirror(version: 4)
        try FileManager.default.removeItem(atPath: workspace.repo + "/" + BlobStore.relativePath(of: try #require(ContentID(hex: four.delta))))
        try origin.clear()
        (mirrorSeen, originSeen) = (mirrorServer.requests.count, origin.requests.count)
        #expect(try device.cairn(["sync", "--wait"]).status == 0)
        try await device.waitForVersion(4)
        #expect(mirrorServer.requests.dropFirst(mirrorSeen).contains { $0.path.contains(four.snapshot) && $0.status == 200 })
        #expect(!origin.requests.dropFirst(originSeen).contains { $0.path.contains(four.snapshot) }, "\(origin.requests.dropFirst(originSeen))")
    }

    @Test("Given a first source under slow_source_rate and a second that answers 500, then the first is cut once, the second refused, and the first, asked again uncut, installs the version in the same attempt")
    func slowSourceAskedAgainLast() async throws {
        try await Self.twoSources("slow-then-broken", bulk: 40_000) { slow, broken, device, delta in
            try slow.set(["rate": 4000])
            try broken.set(["status": 500])
            let seen = slow.requests.count
            let waited = try device.cairn(["sync", "--wait"])
            #expect(waited.status == 0, "\(waited.error)")
            try await device.waitForVersion(2)
            let cuts = device.log.split(separator: "\n").filter { $0.contains("under slow_source_rate") }
            #expect(cuts.count == 1, "\(cuts)")
            // The source logs a request once its last byte is written: maybe after cairnd has
            // installed from it.
            var asked: [(path: String, status: Int, range: String, sent: Int)] = []
            _ = await eventuallyAsync(within: 30) {
                asked = slow.requests.dropFirst(seen).filter { $0.path.contains(delta.hex) }
                return asked.count >= 2
            }
            #expect(asked.count == 2 && asked.last?.status == 206, "\(asked)")
            #expect(device.log.contains("HTTP 500"), "the second source was not asked in between")
        }
    }
}
