import CairnStore
import CairnThreads
import Foundation
import Synchronization

/// A running copy of the installed index to its spare (`Syncer.keepSpare`): its thread, and
/// whether it was asked to stop, which the thread reads between pieces.
struct SpareCopy: Sendable {
    final class Flag: Sendable {
        private let stopped = Atomic<Bool>(false)
        /// Broadcast when the copy is stopped, or when `wake()` is called.
        private let changed = NSCondition()
        var isStopped: Bool { stopped.load(ordering: .relaxed) }

        func stop() {
            changed.lock()
            stopped.store(true, ordering: .relaxed)
            changed.broadcast()
            changed.unlock()
        }

        /// Blocks the copy's thread until it is stopped or `done()` holds, looking again at each
        /// `wake()` (a test holding a copy in flight: `Syncer.beforeSpareCopy`).
        func wait(until done: () -> Bool) {
            changed.lock()
            while !isStopped && !done() { changed.wait() }
            changed.unlock()
        }

        func wake() {
            changed.lock()
            changed.broadcast()
            changed.unlock()
        }
    }

    let flag = Flag()
    let work: BackgroundWork.Pending<Void>

    init(_ body: @escaping @Sendable (Flag) -> Void) {
        let flag = flag
        work = BackgroundWork.Pending { body(flag) }
    }
}

/// What status says of the installed version's spare copy (`Syncer.spareState`).
public enum SpareState: String, Sendable {
    case ready, copying, declined
}

extension Syncer {
    /// When the installed version came from a full snapshot (it keeps `snapshot.blob`) and has
    /// no spare: copies its index to `spare.sqlite` in its folder, on a background thread at
    /// low priority, so that the next delta moves the spare and applies to it in place instead
    /// of copying the live index first (at a million chunks, a 3.7 GB copy that made that delta
    /// take seconds). Later deltas reuse the previous version's file. Called after every sync
    /// attempt, so a copy that an install, rollback or export stopped, or that a restart cut
    /// short, starts again; one still running goes on.
    /// The copy goes to staging, is fsynced, then renamed into the version's folder: a spare is
    /// whole or absent. Kept only when the index is at least `spareIndexMinimumBytes` and the
    /// copy fits `max_disk_bytes` and the free space (with the margin); declined once per version.
    func keepSpare() {
        // A copy that ended (only an install, rollback or export stops one) is forgotten.
        if let copy = spareCopy, copy.work.isDone { spareCopy = nil }
        giveSpareBackIfTheDiskFilled()
        guard spareCopy == nil, let minimum = configuration.spareIndexMinimumBytes, let version = directory.installed(),
              spareDeclined.withLock({ $0 }) != version.version,
              FileSystem.exists(version.directory + "/" + DataDirectoryLayout.snapshotBlobFile),
              !FileSystem.exists(spare(of: version)) else { return }
        let size = Downloader.fileSize(version.indexPath)
        guard size > 0, size >= minimum else { return }
        if let budget = configuration.maxDiskBytes, directory.contentBytes() + size > budget {
            spareDeclined.withLock { $0 = version.version }
            logger.info("no spare copy of the index: it would pass max_disk_bytes; the next delta copies the live index")
            return
        }
        guard let available = try? FileSystem.availableBytes(at: directory.path), available >= size + configuration.freeSpaceMargin else {
            spareDeclined.withLock { $0 = version.version }
            logger.info("no spare copy of the index: the disk lacks room; the next delta copies the live index")
            return
        }
        let partial = partialSpare(of: version)
        let spare = spare(of: version)
        let (logger, before) = (self.logger, beforeSpareCopy)
        spareCopy = SpareCopy { [self] flag in
            before?(flag)
            let clock = ContinuousClock()
            let start = clock.now
            unlink(partial)
            do throws(SyncError) {
                do throws(StoreError) {
                    try FileSystem.copyFile(from: version.indexPath, to: partial, stopping: { flag.isStopped })
                } catch {
                    throw SyncError.writing(error.message, error)
                }
                try Self.fsyncFile(partial)
                guard !flag.isStopped else { throw SyncError(.cancelled, "stopped") }
                guard rename(partial, spare) == 0 else { throw SyncError.system("cannot rename it into \(spare)") }
                try? FileSystem.syncDirectory(version.directory)
                logger.info("kept a spare copy of the index for the next delta", metadata: [
                    "cairn.sync.version": "\(version.version)", "cairn.sync.spare_bytes": "\(size)",
                    "cairn.sync.spare_ms": "\((clock.now - start).milliseconds)",
                ])
            } catch {
                unlink(partial)
                // Not tried again for this version (a read error, a full disk): else after every
                // attempt, for ever.
                if !flag.isStopped {
                    spareDeclined.withLock { $0 = version.version }
                    logger.notice("no spare copy of the index: \(error.message); not tried again for version \(version.version) until cairnd restarts")
                }
            }
        }
    }

    /// Removes the installed version's spare when the disk's free space has fallen under the
    /// margin since it was made (logs, a database, another program filled it): the spare only
    /// saves the next delta a copy, and a device may go months without an install, the one time
    /// `makeRoom` would take it back. Not made again for this version.
    func giveSpareBackIfTheDiskFilled() {
        guard spareCopy == nil, let version = directory.installed(), case let file = spare(of: version), FileSystem.exists(file),
              let available = try? FileSystem.availableBytes(at: directory.path), available < configuration.freeSpaceMargin else { return }
        let bytes = Downloader.fileSize(file)
        guard unlink(file) == 0 else { return }
        try? FileSystem.syncDirectory(version.directory)
        spareDeclined.withLock { $0 = version.version }
        logger.notice("removed the spare copy of the index (\(bytes) bytes): the disk has \(available) bytes free, under the \(configuration.freeSpaceMargin) kept free; the next delta copies the live index")
    }

    /// The spare of the installed version `version`, for status (protocol/socket-api.md,
    /// `spare`): `ready` when its file is there, `copying` while its partial file is (the copy's
    /// thread removes the partial file when it stops or fails), `declined` when it did not fit;
    /// nil otherwise. Reads the data directory, never waits for an attempt.
    public nonisolated func spareState(of version: InstalledVersion?) -> SpareState? {
        guard let version else { return nil }
        if FileSystem.exists(spare(of: version)) { return .ready }
        if FileSystem.exists(partialSpare(of: version)) { return .copying }
        return spareDeclined.withLock { $0 } == version.version ? .declined : nil
    }

    /// `staging/spare-<n>.partial`, where the copy is written before its rename.
    nonisolated func partialSpare(of version: InstalledVersion) -> String {
        "\(directory.stagingPath)/spare-\(version.version).partial"
    }

    /// Stops the spare copy, if one runs, and waits for its thread (the partial file is gone
    /// when this returns; a finished spare stays).
    func stopSpare() async {
        guard let copy = spareCopy else { return }
        spareCopy = nil
        copy.flag.stop()
        await BackgroundWork.run { copy.work.wait() }
    }

    /// Waits for the spare copy to end without stopping it (tests, the bench).
    public func spareFinished() async {
        guard let copy = spareCopy else { return }
        await BackgroundWork.run { copy.work.wait() }
    }
}
