import CairnCore
import CairnTestSupport
import Foundation
import Testing

/// Bad content from a source that answers fine: corrupt or short blobs (the fault server), and
/// manifests that are signed but wrong (re-signed here with the publisher's own key, as a
/// buggy or compromised publisher would), unsigned by a trusted key, replayed or expired.
/// Each is refused with a one-line reason, nothing is installed, the old version answers, and
/// the next good version installs.
@Suite("Faults: content", .offCooperativePool, .serialized)
struct ContentFaultTests {
    @Test("Given a blob with one bit flipped at a random position, then it is refused as hash_mismatch each time")
    func flippedBit() async throws {
        let rig = try await Rig()
        defer { rig.stop() }
        let report = FaultReport("one flipped bit at a random position")
        var positions: [Int] = []
        for number in 1...6 {
            await report.trial(number) {
                let old = rig.version
                let new = try rig.publishNext()
                // Every blob of this version is at least this long, so the flip hits each one fetched.
                let bits = (try rig.currentBlobs().map(\.size).min() ?? 1) * 8
                let position = Int.random(in: 0..<bits)
                positions.append(position)
                try rig.server.set(["flip_bit": position])
                let outcome = try await rig.syncAttempt()
                if let problem = rig.refusal(outcome, codes: ["hash_mismatch"], old: old) { return problem }
                try rig.server.clear()
                return try await rig.recovery(to: new)
            }
        }
        #expect(report.finish("hash_mismatch, nothing installed; bit positions \(positions.sorted())"))
    }

    @Test("Given root files that are wrong in each way the chain walk must catch, then each is refused, nothing installed, and the next good version installs")
    func refusedRoots() async throws {
        let rig = try await Rig(rootPinned: true)
        defer { rig.stop() }
        let rootKey = try PublisherKey(fileText: String(contentsOfFile: rig.rootKey, encoding: .utf8))
        let signing = try PublicKey(fileText: String(contentsOfFile: rig.workspace.publicKey, encoding: .utf8))
        let now = Timestamp(Date())!
        func root2(format: Int = 1, version: Int = 2, signers: [PublisherKey]) throws -> [UInt8] {
            let root = try RootMetadata(formatVersion: format, version: version, created: now,
                                        expires: Timestamp(secondsSince1970: now.secondsSince1970 + 86_400)!,
                                        rootKeys: [rootKey.publicKey], rootThreshold: 1, signingKeys: [signing], signingThreshold: 1)
            return SignedRoot.encode(root, signingKeys: signers)
        }
        let genuine = try root2(signers: [rootKey])
        var flipped = genuine
        let signatureAt = String(decoding: genuine, as: UTF8.self).range(of: "\"signature\":\"")!.upperBound.utf16Offset(in: String(decoding: genuine, as: UTF8.self))
        flipped[signatureAt + 3] = flipped[signatureAt + 3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let cases: [(name: String, codes: Set<String>, bytes: [UInt8])] = [
            // Random bytes that do not begin as markup does: a body beginning with `<` is read
            // as a host's web page, no root at all (NetworkFaultTests.missingRootAnsweredWithAPage),
            // which random bytes did once in 256 runs.
            ("random bytes", ["root_refused"], [0x00] + (1..<300).map { _ in UInt8.random(in: 0...255) }),
            ("a truncated root", ["root_refused"], Array(genuine.prefix(genuine.count / 2))),
            ("a root of 2 MiB", ["size_exceeded"], [UInt8](repeating: UInt8(ascii: " "), count: 2 << 20) + genuine),
            ("root 1 again at root/2", ["root_refused"], try Data(contentsOf: URL(fileURLWithPath: rig.workspace.repo + "/root/1.root.json")).map { $0 }),
            ("root 2 signed by a stranger", ["root_refused"], try root2(signers: [PublisherKey.generate()])),
            ("root 2 in an unknown format", ["root_refused"], try root2(format: 2, signers: [rootKey])),
            ("root 2 with a signature altered", ["root_refused"], flipped),
            ("root 2 claiming to be root 3", ["root_refused"], try root2(version: 3, signers: [rootKey])),
        ]
        let path = rig.workspace.repo + "/root/2.root.json"
        for (number, fault) in cases.enumerated() {
            let report = FaultReport(fault.name)
            await report.trial(number + 1) {
                let old = rig.version
                let new = try rig.publishNext()
                try Data(fault.bytes).write(to: URL(fileURLWithPath: path))
                // Gone whatever the trial says, or the next publish reads it and every later trial fails.
                defer { try? FileManager.default.removeItem(atPath: path) }
                if let problem = rig.refusal(try await rig.syncAttempt(), codes: fault.codes, old: old) { return problem }
                if (rig.device.status()["trust"] as? [String: Any])?["root_version"] as? Int != 1 { return "the trusted root moved" }
                if FileManager.default.fileExists(atPath: rig.device.dataDirectory + "/roots/2.root.json") {
                    return "the refused root was persisted"
                }
                try FileManager.default.removeItem(atPath: path)
                return try await rig.recovery(to: new)
            }
            #expect(report.finish("refused, version \(rig.version - 1) kept answering, root 1 kept"))
        }
    }

    @Test("Given manifests that are wrong in each way a device must catch, then each is refused, nothing installed, and the next good version installs")
    func refusedManifests() async throws {
        // expired_updates = refuse: an expired manifest is refused (the default installs it
        // flagged when newer, CairnIntegrationTests/TrustTests.expiredButNewerFromUSB).
        let rig = try await Rig(config: ["expired_updates": "refuse"])
        defer { rig.stop() }
        let stranger = rig.workspace.folder + "/stranger"
        let keygen = try Binaries.run("cairn-server", ["keygen", "--out", stranger], in: rig.workspace.folder)
        try #require(keygen.status == 0)
        let later = Timestamp(Date().addingTimeInterval(-60))!
        let cases: [(name: String, codes: Set<String>, inject: () throws -> Void)] = [
            // A length that is not the blob's: refused before a byte is kept (since 2026-12-06).
            ("truncated blob", ["http_status"], {
                try rig.publishNext()
                try rig.server.set(["truncate": 64])
            }),
            ("signed by an unknown key", ["manifest_refused"], { try rig.publishNext(key: stranger + "/publisher.key") }),
            ("replayed old manifest", ["rollback"], {
                // The device is on the newest version; a stale mirror serves version 1 again.
                try rig.restoreManifest(1)
            }),
            ("expired manifest (expired_updates = refuse)", ["expired"], {
                try rig.publishNext()
                try rig.tamperManifest {
                    $0.created = Timestamp(Date().addingTimeInterval(-7_200))!
                    $0.expires = later
                }
            }),
            ("delta and snapshot do not give the signed state root", ["state_root_mismatch", "install_failed"], {
                try rig.publishNext()
                let other = ContentID(hashing: Array("not this version".utf8))
                try rig.tamperManifest { $0.stateRoot = other }
            }),
            ("decompression bomb", ["install_failed"], {
                try rig.publishNext()
                try rig.tamperManifest {
                    $0.deltas = []
                    $0.snapshot.uncompressedSize = 64
                }
            }),
            ("blob size 2^60", ["manifest_refused", "disk_full", "size_exceeded"], {
                try rig.publishNext()
                try rig.tamperManifest {
                    $0.deltas = []
                    $0.snapshot.size = 1 << 60
                }
            }),
        ]
        for fault in cases {
            let report = FaultReport(fault.name)
            var reason = ""
            await report.trial(1) {
                let old = try #require(rig.device.status()["version"] as? Int)
                try fault.inject()
                let outcome = try await rig.syncAttempt()
                reason = outcome.map { "\($0.code): \($0.message)" } ?? ""
                if let problem = rig.refusal(outcome, codes: fault.codes, old: old) { return problem }
                // Fault gone: the publisher's own manifest back, then a new good version.
                try rig.server.clear()
                try rig.restoreManifest(rig.version)
                let new = try rig.publishNext()
                return try await rig.recovery(to: new)
            }
            #expect(report.finish("refused: \(reason.prefix(90))"))
        }
    }
}
