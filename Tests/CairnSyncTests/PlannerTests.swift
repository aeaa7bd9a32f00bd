import CairnTestSupport
import CairnCore
import CairnSync
import Testing

@Suite("SyncPlanner and PollSchedule: sync decisions as values")
struct PlannerTests {
    static let rootA = ContentID(hashing: [1]), rootB = ContentID(hashing: [2]), rootC = ContentID(hashing: [3])

    static func manifest(version: Int, root: ContentID = rootB, dimension: Int = 8, deltas: [Manifest.DeltaRef] = [],
                         expires: Int64 = 2_000_000_000, channel: String = "stable") -> Manifest {
        Manifest(channel: channel, version: version, created: Timestamp(secondsSince1970: 1_000_000_000)!,
                 expires: Timestamp(secondsSince1970: expires)!, stateRoot: root, chunkCount: 3, dimension: dimension,
                 model: .init(id: "m", dimension: dimension, maxTokens: 16, files: []),
                 snapshot: .init(sha256: ContentID(hashing: [9]), size: 1_000, uncompressedSize: 4_000),
                 deltas: deltas, publisherKeyID: KeyID(hex: "0011223344556677")!)
    }
    static func delta(from: Int, root: ContentID = rootA, size: Int) -> Manifest.DeltaRef {
        .init(fromVersion: from, fromStateRoot: root, sha256: ContentID(hashing: [UInt8(size % 256), 7]), size: size, uncompressedSize: size * 3)
    }
    let installed = SyncPlanner.Installed(version: 4, stateRoot: rootA, dimension: 8, modelID: "m")
    let now = Timestamp(secondsSince1970: 1_500_000_000)!

    @Test("Given version 4 installed, when the manifest is version 3 or 4 with another root, then it is refused as a rollback")
    func rollback() {
        let planner = SyncPlanner(channel: "stable", installed: installed)
        guard case .refuse(let older) = planner.decide(Self.manifest(version: 3), now: now),
              case .refuse(let replayed) = planner.decide(Self.manifest(version: 4, root: Self.rootC), now: now) else {
            Issue.record("expected refusals"); return
        }
        #expect(older.code == .rollback)
        #expect(replayed.code == .rollback)
        guard case .upToDate = planner.decide(Self.manifest(version: 4, root: Self.rootA), now: now) else {
            Issue.record("the installed version itself is up to date"); return
        }
    }

    @Test("Given nothing installed after version 4 (root A) was forgotten as unservable, then versions below 4 and version 4 with another root are refused as rollbacks, version 4 with root A and version 5 install, and recovery lifts the floor")
    func forgottenFloor() {
        let planner = SyncPlanner(channel: "stable", installed: nil, forgotten: (4, Self.rootA))
        guard case .refuse(let older) = planner.decide(Self.manifest(version: 3), now: now),
              case .refuse(let replayed) = planner.decide(Self.manifest(version: 4, root: Self.rootC), now: now) else {
            Issue.record("expected refusals"); return
        }
        #expect(older.code == .rollback && older.message.contains("installed until it could not be served"))
        #expect(replayed.code == .rollback)
        guard case .install(let again, .full) = planner.decide(Self.manifest(version: 4, root: Self.rootA), now: now),
              case .install(let newer, _) = planner.decide(Self.manifest(version: 5), now: now) else {
            Issue.record("the forgotten version itself and a newer one install"); return
        }
        #expect(again.version == 4 && newer.version == 5)
        var recovering = planner
        recovering.recovering = true
        guard case .install = recovering.decide(Self.manifest(version: 3), now: now) else {
            Issue.record("while recovering, a forgotten version signed by a revoked key is no floor"); return
        }
    }

    @Test("Given version 5 held back by a rollback to 4, then manifests up to 5 are skipped and 6 is installed")
    func heldBack() {
        let planner = SyncPlanner(channel: "stable", installed: installed, heldBack: 5)
        guard case .heldBack = planner.decide(Self.manifest(version: 5), now: now),
              case .install(let next, _) = planner.decide(Self.manifest(version: 6), now: now) else {
            Issue.record("expected version 5 held back and version 6 installed"); return
        }
        #expect(next.version == 6)
    }

    @Test("Given version 5 held back, when no version is installed (the one rolled back to was found unusable and forgotten), then 5 is installed rather than nothing answering")
    func heldBackWithNothingInstalled() {
        let planner = SyncPlanner(channel: "stable", installed: nil, heldBack: 5)
        guard case .install(let next, _) = planner.decide(Self.manifest(version: 5), now: now) else {
            Issue.record("expected version 5 installed"); return
        }
        #expect(next.version == 5)
    }

    @Test("Given a newer manifest past its expiry, then expired_updates = refuse refuses it as expired and install installs it; another channel is refused either way")
    func expiredAndChannel() {
        let refusing = SyncPlanner(channel: "stable", installed: installed, expiredUpdates: .refuse)
        let expiredManifest = Self.manifest(version: 5, expires: now.secondsSince1970)
        guard case .refuse(let expired) = refusing.decide(expiredManifest, now: now),
              case .refuse(let channel) = refusing.decide(Self.manifest(version: 5, channel: "beta"), now: now) else {
            Issue.record("expected refusals"); return
        }
        #expect(expired.code == .expired)
        #expect(channel.code == .channelMismatch)
        let installing = SyncPlanner(channel: "stable", installed: installed, expiredUpdates: .install)
        guard case .install(let taken, _) = installing.decide(expiredManifest, now: now) else {
            Issue.record("an expired manifest newer than the installed one installs under install"); return
        }
        #expect(taken.version == 5)
        guard case .refuse(let older) = installing.decide(Self.manifest(version: 3, expires: now.secondsSince1970), now: now) else {
            Issue.record("an expired, older manifest is still a rollback"); return
        }
        #expect(older.code == .rollback)
    }

    @Test("Given recovery from a version only revoked keys signed, then a lower version installs, a held-back one too, and the same version and root is up to date")
    func recovering() {
        let planner = SyncPlanner(channel: "stable", installed: installed, heldBack: 9, recovering: true)
        guard case .install(let lower, _) = planner.decide(Self.manifest(version: 2), now: now),
              case .install(let held, _) = planner.decide(Self.manifest(version: 9), now: now),
              case .upToDate = planner.decide(Self.manifest(version: 4, root: Self.rootA), now: now),
              case .install(let sameNumber, _) = planner.decide(Self.manifest(version: 4, root: Self.rootC), now: now) else {
            Issue.record("expected installs while recovering"); return
        }
        #expect([lower.version, held.version, sameNumber.version] == [2, 9, 4])
    }

    @Test("Given recovery since a rotation, then a manifest not above the installed version made before it is refused as a rollback, one above it installs (a routine rotation's next version), and one made since installs whatever its number, expired too unless expired_updates = refuse")
    func recoveringSinceARotation() {
        let made = Timestamp(secondsSince1970: 1_000_000_000)!
        let after = SyncPlanner(channel: "stable", installed: installed, recovering: true, recoveringSince: Timestamp(secondsSince1970: 1_000_000_001)!)
        guard case .refuse(let stale) = after.decide(Self.manifest(version: 3), now: now),
              case .install(let newer, _) = after.decide(Self.manifest(version: 5), now: now) else {
            Issue.record("a lower manifest made before the rotation installed, or a higher one did not, while recovering"); return
        }
        #expect(stale.code == .rollback && stale.message.contains("before the rotation"), "\(stale.message)")
        #expect(newer.version == 5)
        let since = SyncPlanner(channel: "stable", installed: installed, recovering: true, recoveringSince: made)
        guard case .install(let lower, _) = since.decide(Self.manifest(version: 2), now: now),
              case .install(let expired, _) = since.decide(Self.manifest(version: 5, expires: 1_200_000_000), now: now) else {
            Issue.record("a manifest made since the rotation, expired or not, did not install while recovering"); return
        }
        #expect([lower.version, expired.version] == [2, 5])
        var refusing = since
        refusing.expiredUpdates = .refuse
        guard case .refuse(let refused) = refusing.decide(Self.manifest(version: 5, expires: 1_200_000_000), now: now) else {
            Issue.record("expired_updates = refuse installed an expired manifest"); return
        }
        #expect(refused.code == .expired && refused.message.contains("(expired_updates = refuse)"))
    }

    @Test("Given deltas from the installed version, then the cheapest matching one is chosen, else the full snapshot")
    func pathChoice() {
        let planner = SyncPlanner(channel: "stable", installed: installed)
        let deltas = [Self.delta(from: 4, size: 300), Self.delta(from: 3, size: 10), Self.delta(from: 4, root: Self.rootC, size: 5)]
        // Only one delta per from_version exists in a real manifest; the planner still checks the root.
        guard case .install(_, .delta(let chosen)) = planner.decide(Self.manifest(version: 5, deltas: [deltas[0], deltas[1]]), now: now) else {
            Issue.record("expected a delta"); return
        }
        #expect(chosen.fromVersion == 4 && chosen.size == 300)
        guard case .install(_, .full) = planner.decide(Self.manifest(version: 5, deltas: [deltas[2]]), now: now),
              case .install(_, .full) = planner.decide(Self.manifest(version: 5, deltas: [Self.delta(from: 4, size: 2_000)]), now: now),
              case .install(_, .full) = planner.decide(Self.manifest(version: 5, dimension: 16, deltas: [deltas[0]]), now: now),
              case .install(_, .full) = SyncPlanner(channel: "stable", installed: nil).decide(Self.manifest(version: 5, deltas: [deltas[0]]), now: now)
        else { Issue.record("expected the full snapshot: wrong root, delta not cheaper, new dimension, nothing installed"); return }
    }

    @Test("Given huge stated sizes, then the disk requirement saturates instead of overflowing")
    func requiredBytes() {
        let path = SyncPlanner.Path.full(.init(sha256: Self.rootA, size: 1 << 53, uncompressedSize: 1 << 53))
        #expect(SyncPlanner.requiredBytes(path: path, alreadyStaged: 0, currentIndexSize: 0, missingModelBytes: .max, margin: 10) == .max)
        let small = SyncPlanner.Path.delta(Self.delta(from: 1, size: 100))
        #expect(SyncPlanner.requiredBytes(path: small, alreadyStaged: 40, currentIndexSize: 1_000, missingModelBytes: 5, margin: 10)
                == 60 + 1_300 + 300 + 5 + 10)
    }

    @Test("Given failures, then waits double from the minimum up to the maximum, reset after a success, each within ±10 %")
    func backoff() {
        var schedule = PollSchedule(interval: .seconds(900), backoffMinimum: .seconds(30), backoffMaximum: .seconds(100))
        var random = SplitMix64(seed: 1)
        var bases: [Duration] = []
        for _ in 0..<4 {
            let wait = schedule.next(succeeded: false, using: &random)
            #expect(wait >= schedule.baseDelay * 0.9 && wait <= schedule.baseDelay * 1.1)
            bases.append(schedule.baseDelay)
        }
        #expect(bases == [.seconds(30), .seconds(60), .seconds(100), .seconds(100)])
        let wait = schedule.next(succeeded: true, using: &random)
        #expect(schedule.baseDelay == .seconds(900) && wait >= .seconds(810) && wait <= .seconds(990))
    }

    @Test("Given failures that doubled the wait, when a failed attempt advanced a download kept to resume, then the wait is the minimum again, and doubles from there")
    func backoffAfterProgress() {
        var schedule = PollSchedule(interval: .seconds(900), backoffMinimum: .seconds(30), backoffMaximum: .seconds(3600))
        var random = SplitMix64(seed: 2)
        for _ in 0..<5 { _ = schedule.next(succeeded: false, using: &random) }
        #expect(schedule.baseDelay == .seconds(480))
        _ = schedule.next(succeeded: false, advanced: true, using: &random)
        #expect(schedule.baseDelay == .seconds(30))
        _ = schedule.next(succeeded: false, using: &random)
        #expect(schedule.baseDelay == .seconds(60))
    }
}
