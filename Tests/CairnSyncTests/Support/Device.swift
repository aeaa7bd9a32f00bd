import CairnTestSupport
import CairnCore
import CairnSync
import Foundation
import Logging

/// A device under test: a fresh data directory and a syncer following `repo`'s channel.
struct Device {
    let path: String
    let directory: DataDirectory
    let syncer: Syncer
    let configuration: SyncConfiguration

    init(repo: RepoFixture, sources: [String], keys: [PublicKey]? = nil, transfer: TransferLimits = TransferLimits(),
         path: String? = nil, now: @escaping @Sendable () -> Date = { Date() }) throws {
        self.path = try path ?? TemporaryDirectory.make()
        configuration = SyncConfiguration(sources: sources, channel: repo.channel, trustedKeys: keys ?? [repo.key.publicKey],
                                          dataDirectory: self.path, pollInterval: .seconds(900), transfer: transfer,
                                          freeSpaceMargin: 1 << 20)
        let logger = Logger(label: "cairn.sync.test")
        directory = try DataDirectory(path: self.path, logger: logger)
        try directory.recover()
        syncer = Syncer(configuration: configuration, directory: directory, logger: logger, now: now)
    }

    var state: SyncState { directory.readState() }
    var currentTarget: String? { try? FileManager.default.destinationOfSymbolicLink(atPath: path + "/current") }
    var previousTarget: String? { try? FileManager.default.destinationOfSymbolicLink(atPath: path + "/previous") }
    func entries(_ folder: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path + "/" + folder)) ?? []).sorted()
    }
}

extension SyncOutcome {
    var installedVersion: Int? { if case .installed(let v) = self { v.version } else { nil } }
    var errorCode: String? { if case .failed(let e) = self { e.code.name } else { nil } }
    var isUpToDate: Bool { if case .upToDate = self { true } else { false } }
}
