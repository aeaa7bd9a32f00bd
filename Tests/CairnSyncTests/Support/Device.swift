import CairnTestSupport
import CairnCore
import CairnIndex
import CairnSync
import Foundation
import Logging
import Testing

/// A device under test: a fresh data directory and a syncer following `repo`'s channel.
struct Device {
    let path: String
    let directory: DataDirectory
    let syncer: Syncer
    let configuration: SyncConfiguration

    /// `trustedRoot` pins a root instead of `keys`; `expiredUpdates` is the device's policy;
    /// `spareIndexMinimumBytes` as cairnd's `spare_index_min_bytes` (its default keeps no spare
    /// of a test-sized index); `directInstallMinimumBytes` as `direct_install_min_bytes`;
    /// `onModel`, `onInstalled` and `servedVersion` as the syncer's.
    init(repo: RepoFixture, sources: [String], keys: [PublicKey]? = nil, transfer: TransferLimits = TransferLimits(),
         path: String? = nil, trustedRoot: [UInt8]? = nil, expiredUpdates: ExpiredUpdatePolicy = .install,
         now: @escaping @Sendable () -> Date = { Date() }, openRowsFiles: Bool = false,
         spareIndexMinimumBytes: Int64? = 256 << 20, directInstallMinimumBytes: Int64? = 64 << 20, maxDiskBytes: Int64? = nil,
         otherChannels: [String] = [], onModel: @escaping @Sendable (String) -> Void = { _ in },
         onInstalled: @escaping @Sendable (InstalledVersion, IndexContents?) async throws(SyncError) -> Void = { _, _ in },
         servedVersion: (@Sendable () -> Int?)? = nil) throws {
        self.path = try path ?? TemporaryDirectory.make()
        var configuration = SyncConfiguration(sources: sources, channel: repo.channel,
                                              trustedKeys: trustedRoot == nil ? keys ?? [repo.key.publicKey] : [],
                                              dataDirectory: self.path, pollInterval: .seconds(900), transfer: transfer,
                                              freeSpaceMargin: 1 << 20)
        configuration.trustedRoot = trustedRoot
        configuration.expiredUpdates = expiredUpdates
        configuration.spareIndexMinimumBytes = spareIndexMinimumBytes
        configuration.directInstallMinimumBytes = directInstallMinimumBytes
        configuration.maxDiskBytes = maxDiskBytes
        configuration.otherChannelDirectories = otherChannels
        self.configuration = configuration
        let logger = Logger(label: "cairn.sync.test")
        directory = try Self.open(self.path, restarting: path != nil, logger: logger)
        try directory.recover()
        // As cairnd does at start-up (`openRowsFiles`): the installed version's rows files,
        // opened for queries, handed to the syncer.
        let rows = openRowsFiles ? try directory.installed().map { try SearchIndex(path: $0.indexPath).contents } : nil
        syncer = Syncer(configuration: configuration, directory: directory, logger: logger, now: now, installedRows: rows,
                        onInstalled: onInstalled, onModel: onModel, servedVersion: servedVersion)
    }

    /// Takes the data directory's lock. Restarting on a folder a previous `Device` of this test
    /// used, waits (at most 20 s) until that one has let the lock go: the old syncer's clean-up
    /// after its last install may still hold it, and so, for an instant, may a process forked
    /// by a parallel test before its exec closes the inherited descriptor. (A real restart
    /// waits for the old process to exit.)
    static func open(_ path: String, restarting: Bool, logger: Logger) throws -> DataDirectory {
        func attempt() -> Result<DataDirectory, SyncError> {
            Result { () throws(SyncError) in try DataDirectory(path: path, logger: logger) }
        }
        var opened = attempt()
        if restarting {
            _ = eventually(within: 20) {
                guard case .failure(let error) = opened, error.code == .locked else { return true }
                opened = attempt()
                return false
            }
        }
        return try opened.get()
    }

    /// The data directory of a device that installed versions 1 and 2 of `repo` (2 by a delta
    /// from 1), then, with `rollingBack`, rolled back to 1, and stopped: its lock goes with it,
    /// as a process's does. For a `Device` restarting on that path.
    static func stopped(afterVersion2Of repo: RepoFixture, rollingBack: Bool = false) async throws -> String {
        try repo.publish(version: 1)
        let device = try Device(repo: repo, sources: [repo.url])
        #expect(await device.syncer.syncOnce().installedVersion == 1)
        try repo.publish(version: 2, chunks: RepoFixture.chunks(revision: 2), deltasFrom: [1])
        #expect(await device.syncer.syncOnce().installedVersion == 2)
        if rollingBack { #expect(try await device.syncer.rollback().version.version == 1) }
        return device.path
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
