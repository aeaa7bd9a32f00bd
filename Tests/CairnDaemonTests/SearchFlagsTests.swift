import CairnClient
import CairnCore
@testable import CairnDaemon
import CairnSearch
import CairnSync
import CairnTestSupport
import Foundation
import Logging
import Testing

/// A search answer's `stale` / `expired` / `expires` are judged on the version that answered
/// it. The version is taken on a search thread after the flags' state is read, so a swap can
/// come between; the flags must not describe the version `current` named a moment before.
/// (The swap's window itself cannot be forced from outside, so the judgement is called
/// directly with the two versions it can see.)
@Suite("Search flags follow the version that answers")
struct SearchFlagsTests {
    static let key = try! PublisherKey(seed: [UInt8](repeating: 9, count: 32))

    static func signedManifest(version: Int, expires: Date) -> [UInt8] {
        let manifest = Manifest(channel: "stable", version: version, created: Timestamp(Date().addingTimeInterval(-86_400 * 30))!,
                                expires: Timestamp(expires)!, stateRoot: ContentID(hashing: Array("root \(version)".utf8)),
                                chunkCount: 3, dimension: 4, model: .init(id: "tiny", dimension: 4, maxTokens: 16, files: []),
                                snapshot: .init(sha256: ContentID(hashing: [1]), size: 1, uncompressedSize: 1),
                                publisherKeyID: key.keyID)
        return SignedManifest.encode(manifest, signingKey: key)
    }

    static func flags(state: SyncState, installed: [UInt8], served: [UInt8]) -> (SearchAnswer.Flags, InstalledVersion) {
        let servedVersion = InstalledVersion(signedManifest: served)!
        let flags = SyncStateStatusProvider.flags(
            state: state, installed: InstalledVersion(signedManifest: installed), servedManifest: served,
            servedVersion: servedVersion.version, servedStateRoot: servedVersion.stateRoot.hex,
            pollInterval: .seconds(900), staleAfterPolls: 3)
        return (flags, servedVersion)
    }

    @Test("an answer from the version before a swap is flagged as that version")
    func flagsOfTheVersionServed() {
        var state = SyncState()
        state.lastCheck = SyncState.time(Date())
        state.lastAttempt = state.lastCheck
        state.lastAttemptReachedSource = true
        state.highestVersionSeen = 2
        let expiredOne = Self.signedManifest(version: 1, expires: Date().addingTimeInterval(-3_600))
        let freshTwo = Self.signedManifest(version: 2, expires: Date().addingTimeInterval(86_400))

        // `current` already names version 2, but version 1 (expired, and behind the newest
        // known) answered: the answer is stale and expired.
        let (old, oldVersion) = Self.flags(state: state, installed: freshTwo, served: expiredOne)
        #expect(old.expired == true)
        #expect(old.stale == true)
        #expect(old.expires == oldVersion.manifest.expires.rfc3339)

        // `current` still named version 1 when the flags were read, and version 2 answered.
        let (new, newVersion) = Self.flags(state: state, installed: expiredOne, served: freshTwo)
        #expect(new.expired == false)
        #expect(new.stale == false)
        #expect(new.expires == newVersion.manifest.expires.rfc3339)
        #expect(new.online == true)

        // No swap: the installed version's own flags.
        let (same, _) = Self.flags(state: state, installed: freshTwo, served: freshTwo)
        #expect(same.expired == false && same.stale == false)
    }
}

@Suite("Status lists the configured sources")
struct StatusSourcesTests {
    @Test("Given state.json with the health of a source since removed from the configuration, then status lists only the configured sources, in their order, a new one with no health yet")
    func removedSourceNotListed() async throws {
        let path = try TemporaryDirectory.make()
        let directory = try DataDirectory(path: path, logger: Logger(label: "cairn.test"))
        var state = SyncState()
        state.sources = [.init(url: "https://old.example"), .init(url: "https://b.example")]
        try directory.writeState(state)
        let configuration = SyncConfiguration(sources: ["https://a.example", "https://b.example"], channel: "field",
                                              trustedKeys: [], dataDirectory: path)
        let provider = SyncStateStatusProvider(directory: directory, configuration: configuration, trust: TrustHolder(nil),
                                               progress: SyncProgress(), spare: { _ in nil })
        let sources = await provider.syncStatus().sources
        // Before 2026-12-06 the removed source was listed, unhealthy, for ever.
        #expect(sources.map(\.url) == ["https://a.example", "https://b.example"], "\(sources)")
    }
}
