import CairnCore
@testable import CairnSync
import Testing

/// `Syncer.olderCopy`: a manifest refused for its signatures that is no news (protocol/root.md,
/// "an older copy"). The real sources and rotations are in TrustTests.oldStickAfterARotation.
@Suite("A manifest refused for its signatures that is an older copy")
struct OlderCopyTests {
    static let installed = InstalledVersion(version: 4, stateRoot: PlannerTests.rootA, directory: "", manifest: PlannerTests.manifest(version: 4),
                                            modelDirectory: nil)

    /// Version `version` signed by a key no policy trusts, and the refusal its check gives.
    static func refused(_ version: Int, channel: String = "stable") -> ([UInt8], SyncError) {
        let bytes = SignedManifest.encode(PlannerTests.manifest(version: version, channel: channel), signingKey: PublisherKey.generate())
        do {
            _ = try SignedManifest.decodeAndVerify(bytes, trustedKeys: [PublisherKey.generate().publicKey])
            return (bytes, SyncError(.manifestRefused, "verified"))
        } catch {
            return (bytes, SyncError(.manifestRefused, error.message, cause: error))
        }
    }

    @Test("Given version 4 installed and version 9 held back, when a source's manifest fails for its signers, then versions up to 9 of the channel are older copies (rollback), and version 10, another channel's, nothing installed, or a signature that does not verify (tampered) stays the refusal it was")
    func olderCopies() {
        for (version, older) in [(3, true), (4, true), (9, true), (10, false)] {
            let (bytes, error) = Self.refused(version)
            let copy = Syncer.olderCopy(bytes, refused: error, channel: "stable", installed: Self.installed, heldBack: 9)
            #expect((copy?.code == .rollback) == older, "version \(version): \(String(describing: copy))")
        }
        let (bytes, error) = Self.refused(3)
        #expect(Syncer.olderCopy(bytes, refused: error, channel: "stable", installed: Self.installed, heldBack: nil)?.message
            .contains("not newer than the installed 4") == true)
        let (other, otherError) = Self.refused(3, channel: "other")
        #expect(Syncer.olderCopy(other, refused: otherError, channel: "stable", installed: Self.installed, heldBack: nil) == nil)
        #expect(Syncer.olderCopy(bytes, refused: error, channel: "stable", installed: nil, heldBack: 9) == nil)
        #expect(Syncer.olderCopy(bytes, refused: SyncError(.manifestRefused, "malformed"), channel: "stable", installed: Self.installed,
                                 heldBack: nil) == nil)
        // A signature by a trusted key that does not verify: tampered, said as such.
        let key = PublisherKey.generate()
        let tampered = Array(String(decoding: SignedManifest.encode(PlannerTests.manifest(version: 3), signingKey: key), as: UTF8.self)
            .replacingOccurrences(of: "\"chunk_count\":3", with: "\"chunk_count\":999").utf8)
        let invalid: SyncError
        do {
            _ = try SignedManifest.decodeAndVerify(tampered, trustedKeys: [key.publicKey])
            invalid = SyncError(.manifestRefused, "verified")
        } catch {
            invalid = SyncError(.manifestRefused, error.message, cause: error)
        }
        #expect((invalid.cause as? CoreError)?.code == .signatureInvalid, "\(invalid.message)")
        #expect(Syncer.olderCopy(tampered, refused: invalid, channel: "stable", installed: Self.installed, heldBack: nil) == nil)
    }
}
