import CairnSync
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
}
