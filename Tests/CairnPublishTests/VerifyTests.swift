import CairnCore
import CairnStore
import CairnTestSupport
import Foundation
import Testing
@testable import CairnPublish

@Suite("Verify", .offCooperativePool)
struct VerifyTests {
    /// A repository with two versions (so one delta).
    static func twoVersions() throws -> Workspace {
        let workspace = try Workspace()
        var chunks = SampleKB.chunks(count: 10)
        _ = try workspace.publish(try workspace.writeSource(chunks))
        chunks[2].content += " radio"
        _ = try workspace.publish(try workspace.writeSource(chunks))
        return workspace
    }

    static func flipLastByte(_ path: String) throws {
        var bytes = try FileSystem.read(path)
        bytes[bytes.count - 1] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    @Test("Given an untouched repository, when verified, then every manifest, blob, snapshot and delta checks out")
    func clean() throws {
        let report = try Self.twoVersions().verify()
        #expect(report.problems == [])
        #expect(report.manifests == 3)
        #expect(report.snapshots == 2)
        #expect(report.deltas == 1)
    }

    @Test("Given a snapshot blob with one flipped bit, when verified, then the problem names that version's snapshot blob")
    func tamperedSnapshot() throws {
        let workspace = try Self.twoVersions()
        let manifest = try workspace.manifest(2)
        try Self.flipLastByte(workspace.repository.blobs.path(of: manifest.snapshot.sha256))
        let problems = workspace.verify().problems
        #expect(problems.count >= 1)
        #expect(problems.contains { $0.contains("v2") && $0.contains("snapshot") && $0.contains("SHA-256") })
    }

    @Test("Given a delta blob with one flipped bit, when verified, then the delta is reported")
    func tamperedDelta() throws {
        let workspace = try Self.twoVersions()
        let ref = try #require(try workspace.manifest(2).deltas.first)
        try Self.flipLastByte(workspace.repository.blobs.path(of: ref.sha256))
        #expect(workspace.verify().problems.contains { $0.contains("v1→v2 delta") })
    }

    @Test("Given a version manifest whose chunk count was edited, or with a field added, when verified, then its signature fails (the added field is not taken for a newer publisher's)")
    func tamperedManifest() throws {
        let workspace = try Self.twoVersions()
        let path = workspace.repository.versionPath("stable", 1)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        try text.replacingOccurrences(of: "\"chunk_count\":10", with: "\"chunk_count\":11")
            .write(toFile: path, atomically: true, encoding: .utf8)
        let problems = workspace.verify().problems
        #expect(problems.contains { $0.contains("1.json") && $0.contains("signature") })
        // A field added by hand is the same forgery, not a newer publisher's manifest: the
        // signature is checked before the fields are read.
        let second = workspace.repository.versionPath("stable", 2)
        let added = try String(contentsOfFile: second, encoding: .utf8)
        try #require(added.contains("\"chunk_count\":"))
        try added.replacingOccurrences(of: "\"chunk_count\":", with: "\"shards\":4,\"chunk_count\":")
            .write(toFile: second, atomically: true, encoding: .utf8)
        let forged = workspace.verify().problems.filter { $0.contains("versions/2.json:") }
        #expect(!forged.isEmpty && forged.allSatisfy { $0.contains("signature") && !$0.contains("newer software") }, "\(forged)")
    }

    @Test("Given a repository signed by another key, when verified with a pinned key, then every manifest is refused")
    func untrustedKey() throws {
        let workspace = try Self.twoVersions()
        let other = PublisherKey.generate().publicKey
        let report = RepositoryVerifier(repository: workspace.repository, trustedKeys: [other]).verify()
        #expect(report.problems.count == 3)
        #expect(report.problems.allSatisfy { $0.contains("signed by none") })
    }

    @Test("Given an expired root and an expired current manifest (signatures still good), when verified, then both are reported: devices set to refuse take nothing new, and answers are flagged expired")
    func expiries() throws {
        let workspace = try Workspace()
        _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 6)))
        #expect(workspace.verify().problems.isEmpty)
        // The current manifest, dated back and signed again by its key.
        var old = try workspace.manifest(1)
        old.created = Timestamp(secondsSince1970: 1_700_000_000)!
        old.expires = Timestamp(secondsSince1970: 1_700_086_400)!
        let signed = SignedManifest.encode(old, signingKey: workspace.key)
        for path in [workspace.repository.versionPath("stable", 1), workspace.repository.manifestPath("stable")] {
            try FileSystem.writeAtomically(signed, to: path)
        }
        let manifestProblems = workspace.verify().problems
        #expect(manifestProblems.count == 1 && manifestProblems[0].contains("version 1 expired at"), "\(manifestProblems)")
        // A root made two days ago for one day (the clock of root init, not this machine's, dates it).
        let rootKey = PublisherKey.generate()
        _ = try RootPublisher.initialize(repository: workspace.repository, rootKeys: [rootKey], rootThreshold: 1,
                                         signingKeys: [workspace.key.publicKey], signingThreshold: 1, expiresDays: 1,
                                         now: Date(timeIntervalSinceNow: -2 * 86_400))
        #expect(workspace.verify().problems.contains { $0.contains("root 1 expired at") && $0.contains("root rotate") })
    }

    @Test("Given seven versions each with deltas from the two before, when verified, then every delta is checked while at most three versions' records are held at once (not the whole history)")
    func recordsFollowTheDeltasNotTheHistory() throws {
        let workspace = try Workspace()
        for version in 1...7 {
            _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 5 + version), name: "kb\(version).json"),
                                      keepDeltas: 2)
        }
        let report = workspace.verify()
        #expect(report.problems.isEmpty, "\(report.problems)")
        #expect(report.deltas == 11)  // v2 from v1, then two for each of v3…v7
        #expect(report.peakRecordVersions <= 3, "\(report.peakRecordVersions)")
    }
}
