@testable import CairnSync
import CairnTestSupport
import Foundation
import Logging
import Testing

@Suite("SyncService: the poll loop", .offCooperativePool)
struct ServiceTests {
    @Test("Given a running service with a long poll interval, when sync is requested, then another attempt runs at once")
    func requestSync() async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url])
        let service = SyncService(syncer: device.syncer, configuration: device.configuration, logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await service.run() }
            #expect(await eventuallyAsync { device.state.installedVersion == 1 })
            let attempts = device.state.attempts ?? 0
            try repo.publish(version: 2)
            service.requestSync()
            #expect(await eventuallyAsync { device.state.installedVersion == 2 })
            #expect((device.state.attempts ?? 0) == attempts + 1)
            group.cancelAll()
        }
    }

    @Test("Given a running service whose requested attempts are limited (five at once, then one an hour), when sync is requested six times, one after the other's attempt ended, then five attempts run and the sixth waits, with the time it starts in the progress reading: an hour ahead, or the next scheduled poll when that comes first", arguments: [86_400, 1_200])
    func requestsBeyondTheAllowanceWait(pollSeconds: Int) async throws {
        let repo = try RepoFixture(withModel: false)
        try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url])
        var configuration = device.configuration
        configuration.requestInterval = .seconds(3600)
        configuration.pollInterval = .seconds(pollSeconds)
        let service = SyncService(syncer: device.syncer, configuration: configuration, logger: Logger(label: "test"))
        let progress = device.syncer.progress
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await service.run() }
            #expect(await eventuallyAsync { progress.reading().finished == 1 })
            for request in 1...SyncConfiguration.requestBurst {
                let attempt = service.requestSync()
                #expect(await eventuallyAsync { progress.reading().finished >= attempt }, "request \(request)")
                #expect(progress.reading().requestHeldUntil == nil)
            }
            let held = service.requestSync()
            #expect(await eventuallyAsync { progress.reading().requestHeldUntil != nil })
            let until = try #require(progress.reading().requestHeldUntil).timeIntervalSinceNow
            // The allowance refills one attempt an hour: nearly an hour ahead, less the time the
            // first five took (whole seconds, rounded up). A poll due sooner (its interval ±10 %)
            // starts the attempt then, and does not wait for the allowance.
            if pollSeconds > 3600 {
                #expect(until > 3000 && until <= 3601, "\(until)")
            } else {
                #expect(until > 0.85 * Double(pollSeconds) && until <= 1.1 * Double(pollSeconds) + 1, "\(until)")
            }
            #expect(progress.reading().finished < held && progress.reading().current == nil)
            // Two more requests while it waits join it: they get its number.
            #expect(service.requestSync() == held && service.requestSync() == held)
            group.cancelAll()
        }
        #expect(progress.reading().requestHeldUntil == nil, "the hold ends with the service")
    }

    @Test("Given a request allowance of five at once and one per 10 s, then five attempts start at once, the sixth waits 10 s, one starts each 10 s after, and an idle minute gives back five, not six")
    func allowanceRefills() {
        let start = ContinuousClock.now
        var allowance = RequestAllowance(interval: .seconds(10), burst: 5)
        for _ in 1...5 { #expect(allowance.take(at: start) == nil) }
        #expect(allowance.take(at: start) == .seconds(10))
        #expect(allowance.take(at: start + .seconds(4)) == .seconds(6))
        #expect(allowance.take(at: start + .seconds(10)) == nil)
        #expect(allowance.take(at: start + .seconds(10)) == .seconds(10))
        let later = start + .seconds(70)
        for _ in 1...5 { #expect(allowance.take(at: later) == nil) }
        #expect(allowance.take(at: later) != nil)
        var unlimited = RequestAllowance(interval: .zero, burst: 5)
        for _ in 1...50 { #expect(unlimited.take(at: start) == nil) }
    }

    @Test("Given requests made before an attempt starts, when it starts, then they are spent: each got that attempt's number, and none asks for another; a request after the start gets the next number and stays pending")
    func requestsSpentAsTheAttemptStarts() {
        let progress = SyncProgress(), trigger = SyncTrigger()
        progress.onBegin { trigger.spend() }
        #expect(progress.request { trigger.fire() } == 1 && progress.request { trigger.fire() } == 1)
        #expect(trigger.isPending)
        progress.begin(at: Date())
        #expect(!trigger.isPending)
        #expect(progress.request { trigger.fire() } == 2 && trigger.isPending)
    }
}
