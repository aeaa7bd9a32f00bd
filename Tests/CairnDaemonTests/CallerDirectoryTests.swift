@testable import CairnDaemon
import CairnTestSupport
import Foundation
import Synchronization
import Testing

/// The rollback check's look-ups (`CallerDirectory`). A directory service that hangs (LDAP with a
/// hard bind policy, a stuck sssd) cannot be produced for real here: the group look-up is stood
/// in for by a function that blocks its thread, the one simulated fault of this suite.
@Suite("CallerDirectory: one look-up at a time, none waited on for ever", .offCooperativePool)
struct CallerDirectoryTests {
    @Test("Given eight callers asking for the operator group at once, then one look-up answers them all, and the next caller within a minute gets it remembered")
    func oneLookUpForCallersAskingTogether() async {
        let lookUps = Atomic<Int>(0)
        let directory = CallerDirectory(operatorGroup: "admins", patience: .seconds(30)) { _ in
            lookUps.add(1, ordering: .relaxed)
            usleep(200_000) // a slow directory: callers arrive while it answers
            return 4242
        }
        let answers = await withTaskGroup(of: (gid: gid_t?, lookedUp: Bool).self) { group in
            for _ in 0..<8 { group.addTask { await directory.operatorGroupID() } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.allSatisfy { $0.gid == 4242 } && answers.filter(\.lookedUp).count == 1, "\(answers)")
        let again = await directory.operatorGroupID()
        #expect(again.gid == 4242 && !again.lookedUp && lookUps.load(ordering: .relaxed) == 1)
    }

    @Test("Given a group look-up that does not return (a hung directory), then a caller waits its patience and is answered \"no group\", which grants nothing; the next caller within a minute gets that answer without waiting or a new look-up")
    func hungLookUpGrantsNothing() async {
        let lookUps = Atomic<Int>(0)
        let release = DispatchSemaphore(value: 0)
        let directory = CallerDirectory(operatorGroup: "admins", patience: .milliseconds(200)) { _ in
            lookUps.add(1, ordering: .relaxed)
            release.wait() // the directory answers only when the test ends
            return 4242
        }
        defer { release.signal() }
        let first = await directory.operatorGroupID()
        #expect(first.gid == nil && first.lookedUp)
        let second = await directory.operatorGroupID()
        #expect(second.gid == nil && !second.lookedUp && lookUps.load(ordering: .relaxed) == 1)
    }
}
