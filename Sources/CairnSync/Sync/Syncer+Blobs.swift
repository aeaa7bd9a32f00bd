import CairnCore
import CairnIndex
import CairnStore
import CairnThreads
import Foundation
import Logging
import Synchronization

extension Syncer {
    /// Downloads blob `id` of `size` bytes from `base` into `staging/<hex>.partial` (resuming what
    /// is there) and checks its SHA-256. A mismatch after a resume (the earlier bytes may come from
    /// another source) restarts from zero once; a mismatch on a whole download refuses this source.
    /// Returns the path of the verified file.
    func fetchBlob(base: String, id: ContentID, size: Int) async throws(SyncError) -> String {
        let partial = "\(directory.stagingPath)/\(id.hex).partial"
        let url = "\(base)/\(BlobStore.relativePath(of: id))"
        for round in 0..<2 {
            let resumed = Downloader.fileSize(partial) > 0
            // The whole download after a resumed one failed its hash asks caches to revalidate too.
            lastAttemptStats.add(try await download(url, base: base, to: partial, size: size, tap: nil,
                                                    revalidate: round > 0 || damagedURLs.contains(url)))
            if try await BackgroundWork.run({ () throws(SyncError) in try Self.hashFile(partial) }) == id {
                damagedURLs.remove(url)
                return partial
            }
            unlink(partial)
            if !resumed {
                damagedURLs.insert(url)
                break
            }
            progress.expect(Int64(size))
            logger.info("resumed blob failed its hash; downloading it again whole", metadata: ["cairn.sync.blob": "\(id.hex.prefix(12))"])
        }
        throw Self.hashMismatch(id, from: base)
    }

    /// `downloader.download` of a blob of source `base`; a copy there of another size than
    /// signed marks `url` damaged, as a hash mismatch does, so that the next request for it
    /// asks caches to revalidate, and so does a blob not found (a signed manifest names it:
    /// a 404 is an answer from before it was published, which a cache may keep).
    private func download(_ url: String, base: String, to partial: String, size: Int, tap: (any DownloadTap)?,
                          revalidate: Bool) async throws(SyncError) -> TransferStats {
        do {
            return try await downloader.download(url: url, to: partial, size: Int64(size), access: configuration.access(for: base),
                                                 tap: tap, progress: progress, handingOver: handingOver, revalidate: revalidate)
        } catch {
            // (No cache stands before a file:// source.)
            if error.cause is Downloader.WrongSize || error.cause is Downloader.NotHeld && SourceURL.filePath(base) == nil {
                damagedURLs.insert(url)
            }
            throw error
        }
    }

    private static func hashMismatch(_ id: ContentID, from base: String) -> SyncError {
        SyncError(.hashMismatch, "blob \(id.hex.prefix(12))… from \(base) does not match its SHA-256"
                  + (SourceURL.filePath(base) == nil ? " (a damaged file, or a cache's damaged copy: the next request for it asks caches to revalidate)" : " (a damaged file)")
                  + "; trying the next source")
    }

    /// Downloads the full snapshot's blob (as `fetchBlob`) and inflates it into `index`. A
    /// download from the blob's first byte inflates the bytes as they arrive (`SnapshotStream`);
    /// a resumed one is hashed and inflated afterwards, in one pass over the file
    /// (`Zlib.decompressFile`). A resumed blob that fails its hash (its earlier bytes may come
    /// from another source) is downloaded again whole, once, as `fetchBlob` does. Returns the
    /// verified blob's path. `bypassingCache`: the index is written around the page cache
    /// (`SyncConfiguration.directInstallMinimumBytes`).
    func fetchSnapshot(base: String, snapshot: Manifest.Snapshot, index: String, bypassingCache: Bool,
                       retry: Bool = true) async throws(SyncError) -> String {
        let partial = "\(directory.stagingPath)/\(snapshot.sha256.hex).partial"
        let url = "\(base)/\(BlobStore.relativePath(of: snapshot.sha256))"
        if Downloader.fileSize(partial) == 0 {
            let stream = try SnapshotStream(index: index, uncompressedSize: snapshot.uncompressedSize,
                                            bypassingCache: bypassingCache)
            let stats: TransferStats
            do {
                stats = try await download(url, base: base, to: partial, size: snapshot.size, tap: stream,
                                           revalidate: damagedURLs.contains(url))
                stream.endInput()
            } catch {
                stream.endInput()
                throw error
            }
            lastAttemptStats.add(stats)
            if stream.received == Int64(snapshot.size) {
                guard stream.digest == snapshot.sha256 else {
                    unlink(partial)
                    damagedURLs.insert(url)
                    throw Self.hashMismatch(snapshot.sha256, from: base)
                }
                damagedURLs.remove(url)
                try stream.finish()
                // Kept as the version's snapshot.blob and fsynced before the swap: start its writeback.
                FileSystem.startWriteback(path: partial)
                return partial
            }
            // The stream did not see the whole blob from its start: inflate the file below.
            unlink(index)
        }
        lastAttemptStats.add(try await download(url, base: base, to: partial, size: snapshot.size, tap: nil,
                                                revalidate: damagedURLs.contains(url)))
        do {
            try await BackgroundWork.run { () throws(StoreError) in
                try Zlib.decompressFile(partial, sha256: snapshot.sha256, to: index, size: snapshot.uncompressedSize,
                                        bypassingCache: bypassingCache)
            }
        } catch where error.code == .hashMismatch {
            unlink(partial)
            guard retry else {
                damagedURLs.insert(url)
                throw Self.hashMismatch(snapshot.sha256, from: base)
            }
            progress.expect(Int64(snapshot.size))
            logger.info("resumed blob failed its hash; downloading it again whole",
                        metadata: ["cairn.sync.blob": "\(snapshot.sha256.hex.prefix(12))"])
            return try await fetchSnapshot(base: base, snapshot: snapshot, index: index, bypassingCache: bypassingCache, retry: false)
        } catch {
            throw IndexBuilder.snapshotFailure(error)
        }
        return partial
    }

    static func hashFile(_ path: String) throws(SyncError) -> ContentID {
        // A megabyte at a time: a delta blob grows with the change, and a model's weights are
        // tens of megabytes. (A snapshot blob is hashed as it is inflated: `fetchSnapshot`.)
        do { return try FileSystem.sha256(of: path).id } catch {
            throw SyncError(.io, "cannot read staged blob \(path): \(error.reason)", cause: error)
        }
    }

    /// The model folder `models/<Manifest.Model.folderName>` for `manifest`, downloading and
    /// verifying missing files first. Nil when the manifest names no weights (lexical-only).
    /// Another channel of this cairnd fetching the same model is waited for, and a channel
    /// that holds it is linked (`adoptModelFromOtherChannels`): channels that start together
    /// download it once.
    func ensureModel(_ manifest: Manifest, base: String) async throws(SyncError) -> String? {
        guard let name = manifest.model.folderName else { return nil }
        if let existing = existingModelFolder(manifest) { return existing }
        // Past the wait's limit (another channel's source slower than this one's), this channel
        // downloads the model too, without the turn.
        let key = modelFetchKey(name)
        var turn = false
        if let key {
            while true {
                guard !Task.isCancelled else { throw SyncError(.cancelled, "stopped while waiting for another channel's model") }
                turn = ModelFetches.shared.begin(key)
                guard !turn, await waitForModelFetch(key) else { break }
            }
        }
        defer { if turn, let key { ModelFetches.shared.end(key) } }
        if let linked = await adoptModelFromOtherChannels(manifest, waiting: false) { return linked }
        let folder = "\(directory.modelsPath)/\(name)"
        var staged: [(String, String)] = []
        for file in manifest.model.files {
            staged.append((file.name, try await fetchBlob(base: base, id: file.sha256, size: file.size)))
        }
        let partial = folder + ".partial"
        try? FileManager.default.removeItem(atPath: partial)
        do {
            try FileSystem.makeDirectory(partial, syncingParents: false)
            for (name, path) in staged {
                guard rename(path, "\(partial)/\(name)") == 0 else { throw SyncError.system("cannot move \(name) into \(partial)") }
                try Self.fsyncFile("\(partial)/\(name)")
            }
            try Self.placeModelFolder(partial, at: folder, in: directory.modelsPath)
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError.writing("cannot install the model folder: \(error)", error)
        }
        return folder
    }

    /// Renames the model folder `partial`, its files durable, into place at `folder`.
    private static func placeModelFolder(_ partial: String, at folder: String, in models: String) throws {
        try FileSystem.syncDirectory(partial)
        // An incomplete folder of that name goes first.
        removeModelFolder(folder)
        guard rename(partial, folder) == 0 else { throw SyncError.system("cannot rename \(partial) into place") }
        try FileSystem.syncDirectory(models)
    }

    /// Removes the model folder `folder`, renamed aside first (`.incomplete`) so that its name is
    /// free at once (its files stay open where a served version loaded them). False when it
    /// cannot be renamed (absent).
    @discardableResult
    private static func removeModelFolder(_ folder: String) -> Bool {
        let aside = folder + ".incomplete"
        try? FileManager.default.removeItem(atPath: aside)
        guard rename(folder, aside) == 0 else { return false }
        try? FileManager.default.removeItem(atPath: aside)
        return true
    }

    /// Waits for another channel's fetch of `key`, within the attempt's limit
    /// (`modelWaitDeadline`, `ModelFetches.waitLimit` after its first wait that found a fetch
    /// running). False once the limit has passed.
    func waitForModelFetch(_ key: String) async -> Bool {
        let deadline = modelWaitDeadline ?? ContinuousClock.now + ModelFetches.waitLimit
        modelWaitDeadline = deadline
        guard ContinuousClock.now < deadline else { return false }
        progress.waiting(for: Self.waitingForModel)
        await ModelFetches.shared.wait(for: key, atMost: deadline - ContinuousClock.now)
        progress.waiting(for: nil)
        return true
    }

    /// What status says an attempt waits for while another channel downloads its model.
    static let waitingForModel = "another channel of this cairnd downloading the same model (at most "
        + "\(ModelFetches.waitLimit.components.seconds / 60) minutes, then this channel downloads it)"

    /// The key under which the channels of this cairnd take turns fetching model folder `name`
    /// (`ModelFetches`): the name and every channel's data directory. Nil for a lone channel.
    nonisolated func modelFetchKey(_ name: String) -> String? {
        guard !configuration.otherChannelDirectories.isEmpty else { return nil }
        return ([name] + ([directory.path] + configuration.otherChannelDirectories).sorted()).joined(separator: "\n")
    }

    /// Links `manifest`'s model folder from another channel of this cairnd that holds it whole
    /// (`models/<name>` in its data directory), each file checked against its signed hash,
    /// instead of downloading it again: some 90 MB over a link the channels share, and as much
    /// disk. Hard links: model files are never written in place, and each channel removes only
    /// its own names. Nothing when the model is here already, when no other channel holds it
    /// on this file system, or when a file fails its hash (the download then fetches it; that
    /// folder is not tried again in this attempt). With `waiting` (the first look of an
    /// install), the folder here is looked for first, then a fetch of that model by another
    /// channel is waited for (the room an install needs is counted after this); without, the
    /// caller has looked (`ensureModel`, after its own wait). Returns the model folder here,
    /// linked or found; nil when there is none, and for a channel alone in its cairnd.
    @discardableResult
    func adoptModelFromOtherChannels(_ manifest: Manifest, waiting: Bool) async -> String? {
        guard let name = manifest.model.folderName, !configuration.otherChannelDirectories.isEmpty else { return nil }
        if waiting {
            if let existing = existingModelFolder(manifest) { return existing }
            if let key = modelFetchKey(name), ModelFetches.shared.isFetching(key) { _ = await waitForModelFetch(key) }
        }
        guard let source = configuration.otherChannelDirectories.lazy.map({ "\($0)/\(DataDirectoryLayout.modelsFolder)/\(name)" })
                  .first(where: { !modelLinksRefused.contains($0) && manifest.model.isWhole(in: $0) }) else { return nil }
        let (files, models, logger) = (manifest.model.files, directory.modelsPath, logger)
        let folder = "\(models)/\(name)", partial = folder + ".partial"
        let linked = await BackgroundWork.run { () -> Bool in
            try? FileManager.default.removeItem(atPath: partial)
            do {
                try FileSystem.makeDirectory(partial, syncingParents: false)
                for file in files {
                    guard link("\(source)/\(file.name)", "\(partial)/\(file.name)") == 0 else {
                        throw SyncError.system("cannot link \(file.name) from \(source)")
                    }
                }
                // The first failing file (iterated: a lazy `.first` would hash it twice).
                for failing in Self.filesFailingHash(files, in: partial) {
                    throw SyncError(.hashMismatch, "\(source)/\(failing.name) "
                                    + (failing.unread.map { "cannot be read: \($0.reason)" } ?? "does not have its signed SHA-256"))
                }
                try Self.placeModelFolder(partial, at: folder, in: models)
                logger.info("linked the model from another channel's folder instead of downloading it", metadata: ["cairn.sync.model": "\(source)"])
                return true
            } catch {
                try? FileManager.default.removeItem(atPath: partial)
                logger.notice("the model is downloaded: another channel's copy cannot be linked (\(error))")
                return false
            }
        }
        if !linked { modelLinksRefused.insert(source) }
        return linked ? folder : nil
    }

    /// The folder in `models/` that holds `manifest`'s model files: the one named for them, or
    /// one named for the weights alone (as folders were until 2026-12-05) whose other files have
    /// the signed hashes (read again at each install while it is used: kilobytes). Nil when
    /// there is none, or no weights.
    func existingModelFolder(_ manifest: Manifest) -> String? {
        guard let name = manifest.model.folderName else { return nil }
        let folder = "\(directory.modelsPath)/\(name)"
        // An incomplete one would fail every later install's canaries, and never be downloaded again.
        if manifest.model.isWhole(in: folder) { return folder }
        guard let weights = manifest.model.files.first(where: { $0.name == "model.safetensors" }) else { return nil }
        let legacy = "\(directory.modelsPath)/\(weights.sha256.hex)"
        let others = manifest.model.files.filter { $0.name != weights.name }
        guard FileSystem.exists(legacy + "/" + weights.name), Self.filesFailingHash(others, in: legacy).isEmpty else { return nil }
        return legacy
    }

    /// The files of `files` in `folder` whose bytes are not their signed SHA-256, each with the
    /// read's error when it could not be read (nil: read whole, other bytes). The one check of a
    /// model folder's files; what an unreadable one means is its caller's: a folder not to link
    /// or use (`adoptModelFromOtherChannels`, `existingModelFolder`), damage only on EIO
    /// (`removeModelIfDamaged`). Lazy: a caller that needs only the first (iterating, or
    /// `.isEmpty`) hashes no file past it (the weights are some 90 MB).
    nonisolated static func filesFailingHash(_ files: [Manifest.ModelFile], in folder: String)
        -> some Collection<(name: String, unread: StoreError?)> {
        files.lazy.compactMap { file -> (name: String, unread: StoreError?)? in
            do throws(StoreError) {
                return try FileSystem.sha256(of: folder + "/" + file.name).id == file.sha256 ? nil : (file.name, nil)
            } catch {
                return (file.name, error)
            }
        }
    }

    /// Whether the model folder `manifest` uses here has a file that no longer has its signed
    /// SHA-256 (bit rot, a bad sector: `existingModelFolder` checks sizes only, and every
    /// install would fail its canaries for ever); such a folder is removed, so that the next
    /// install downloads it. A version serving keeps the files it mapped. Reads the folder
    /// (some 90 MB) on an install thread; called only after a failure.
    func removeModelIfDamaged(_ manifest: Manifest) async -> Bool {
        guard let folder = existingModelFolder(manifest) else { return false }
        let (files, logger) = (manifest.model.files, logger)
        return await BackgroundWork.run { () -> Bool in
            // A file that cannot be read now (no descriptor, no memory) is not called damaged;
            // one whose read fails for its bytes (EIO) is.
            let damaged: [String] = Self.filesFailingHash(files, in: folder).filter { $0.unread.map { $0.errno == EIO } ?? true }.map { $0.name }
            guard !damaged.isEmpty, Self.removeModelFolder(folder) else { return false }
            logger.error("the model folder \(folder) no longer has its signed hashes (\(damaged.joined(separator: ", ")) damaged on this disk); removed, to be downloaded again")
            return true
        }
    }

    /// The bytes of the model files `manifest` needs that the device does not have.
    func missingModelBytes(_ manifest: Manifest) -> Int64 {
        guard manifest.model.folderName != nil, existingModelFolder(manifest) == nil else { return 0 }
        return manifest.model.files.reduce(Int64(0)) { $0 + Int64($1.size) }
    }

    /// The bytes of `path`'s blob already in staging (an earlier attempt's partial download).
    func stagedBytes(_ path: SyncPlanner.Path) -> Int64 {
        Downloader.fileSize(stagedBlobPath(path.blob.sha256))
    }

    /// Where a blob is downloaded to (`<sha256>.partial` in staging), kept across restarts.
    func stagedBlobPath(_ id: ContentID) -> String {
        "\(directory.stagingPath)/\(id.hex).partial"
    }

    /// What an install along `path` still has to download: the missing model files and the rest
    /// of the blob.
    func bytesToDownload(manifest: Manifest, path: SyncPlanner.Path) -> Int64 {
        missingModelBytes(manifest) + Int64(path.blob.size) - stagedBytes(path)
    }

    /// The bytes an install along `path` adds beside the live version, plus `margin`. A delta
    /// counts a copy of the live index, unless it will move a file instead (`willReuse`): the
    /// installed version's spare, or the previous version's index brought up to date by the kept
    /// delta, whose inflated scratch copy and growth of the file count instead. (Counting that
    /// copy anyway made a tight device drop its previous version, and with it the file to apply
    /// in place, and copy the whole index for every delta.)
    func installBytes(manifest: Manifest, path: SyncPlanner.Path, installed: InstalledVersion?, margin: Int64) -> Int64 {
        let reused = installed.flatMap { installed in
            path.isDelta ? reusableFile(installed: installed).flatMap { willReuse($0, installed: installed) ? $0 : nil } : nil
        }
        let copied: Int64 = if let reused { 2 * Int64(reused.catchUp?.ref.uncompressedSize ?? 0) } else {
            installed.map { Downloader.fileSize($0.indexPath) } ?? 0
        }
        return SyncPlanner.requiredBytes(path: path, alreadyStaged: stagedBytes(path), currentIndexSize: copied,
                                  rowsBytes: SyncPlanner.rowsBytes(path: path, chunks: manifest.chunkCount, dimension: manifest.dimension),
                                  missingModelBytes: missingModelBytes(manifest), margin: margin)
    }

    /// Whether a delta will bring `file` up in place, as `IndexBuilder.applyDelta` decides, and
    /// not copy the live index: the file is not open, and the previous version's file has its
    /// kept delta whole (it is kept without an fsync: a power cut may tear it) and the installed
    /// rows to check the new delta against first. Else the copy must be counted, or a tight disk
    /// keeps the previous version and fails `disk_full` copying, at every attempt.
    func willReuse(_ file: IndexBuilder.ReusableFile, installed: InstalledVersion) -> Bool {
        guard !Database.isOpenImmutable(file.path) else { return false }
        guard let kept = file.catchUp else { return true }
        guard let rows = installedRows, rows.meta.version == installed.version, rows.meta.stateRoot == installed.stateRoot else { return false }
        // Hashed once an attempt, off the actor (`hashKeptDelta`); makeRoom measures several times.
        if let known = keptDeltaWhole, known.blob == kept.blob { return known.whole }
        let whole = (try? FileSystem.sha256(of: kept.blob))?.id == kept.ref.sha256
        keptDeltaWhole = (kept.blob, whole)
        return whole
    }

    /// Reads the kept delta's SHA-256 for `willReuse` on an install thread, before `makeRoom`
    /// asks: a file of a delta's size, which the actor's cooperative thread (the socket's
    /// queries share them) must not spend its time on. Nothing for a full snapshot.
    func hashKeptDelta(path: SyncPlanner.Path, installed: InstalledVersion?) async {
        guard path.isDelta, let installed, let kept = reusableFile(installed: installed)?.catchUp,
              keptDeltaWhole?.blob != kept.blob else { return }
        let whole = await BackgroundWork.run { (try? FileSystem.sha256(of: kept.blob))?.id == kept.ref.sha256 }
        keptDeltaWhole = (kept.blob, whole)
    }

    /// Makes room for an install beside the live version (protocol/data-directory.md, "Disk"):
    /// when the new version would pass `max_disk_bytes`, or the free space, with the previous
    /// version kept, the installed version's spare copy (if any, for a full snapshot, which does
    /// not use it) is removed first, then the previous version (recorded as `previous_dropped`).
    /// Throws `disk_budget` when it still does not fit within `max_disk_bytes` (`unfetched` says
    /// what the refusal leaves undownloaded); the free space is `checkDiskSpace`'s.
    func makeRoom(manifest: Manifest, path: SyncPlanner.Path, installed: InstalledVersion?,
                  state: inout SyncState, unfetched: String = "nothing was downloaded") throws(SyncError) {
        var needed: Int64 = 0, used: Int64 = 0, overBudget = false, diskShort = false
        func measure() {
            needed = installBytes(manifest: manifest, path: path, installed: installed, margin: 0)
            // Walked only under a budget: a large data directory holds many files.
            used = configuration.maxDiskBytes == nil ? 0 : directory.contentBytes()
            overBudget = configuration.maxDiskBytes.map { used + needed > $0 } ?? false
            diskShort = (try? FileSystem.availableBytes(at: directory.path)).map { $0 < needed + configuration.freeSpaceMargin } ?? false
        }
        measure()
        // First what helps no one: version folders no link names (the one a rollback left, or
        // one an install renamed into place before it failed), but the one the daemon serves
        // and an install's own `.partial` folder, and a download this manifest does not need
        // (one cut off for a version since superseded), which would otherwise count against
        // every install.
        if overBudget || diskShort {
            let removed = directory.removeUnreferencedVersions(keeping: servedFolder, keepingPartial: true)
            if !removed.isEmpty {
                logger.notice("removed version folders no link names (\(removed.joined(separator: ", "))) to make room for version \(manifest.version)")
                measure()
            }
        }
        if overBudget || diskShort {
            let wanted = manifest.blobIDs
            let freed = directory.removeDownloads(notIn: wanted)
            if freed > 0 {
                logger.notice("removed \(freed) bytes of abandoned downloads to make room for version \(manifest.version)")
                measure()
            }
        }
        // A delta would move the spare rather than copy the live index: removing it frees no room.
        if overBudget || diskShort, case .full = path, let installed, unlink(spare(of: installed)) == 0 {
            // Not made again after this attempt, should the snapshot fail (a source down, a
            // corrupt blob): the next attempt would remove it again, a whole index copied for
            // nothing at each back-off. A version installing ends it.
            spareDeclined.withLock { $0 = installed.version }
            logger.notice("removed the spare copy of version \(installed.version)'s index to make room for version \(manifest.version)")
            measure()
        }
        // Other channels' spares next: each only saves time, and a full disk is all channels'.
        for other in configuration.otherChannelDirectories where diskShort {
            guard let current = try? FileManager.default.destinationOfSymbolicLink(atPath: other + "/" + DataDirectoryLayout.currentLink),
                  unlink(other + "/" + current + "/" + DataDirectoryLayout.spareIndexFile) == 0 else { continue }
            logger.notice("removed the spare copy of another channel's index to make room for version \(manifest.version)",
                          metadata: ["cairn.sync.other_channel": "\((other as NSString).lastPathComponent)"])
            measure()
        }
        // Then a version a newer cairnd installed, which this build cannot serve (the upgrade
        // back fetches it again), before the rollback target.
        if overBudget || diskShort, let newer = directory.dropNewer() {
            directory.removeUnreferencedVersions(keeping: servedFolder, keepingPartial: true)
            // Its model too, unless this install needs it (a model changes with a format, often).
            directory.removeUnusedModels(served: servedFolder.first,
                                         keeping: existingModelFolder(manifest).map { ($0 as NSString).lastPathComponent })
            logger.notice("removed \(newer), which a newer cairnd installed, to make room for version \(manifest.version)")
            measure()
        }
        // Never the version the daemon serves (`previous`, while `current` cannot be opened now).
        if overBudget || diskShort, let previous = directory.previousVersion(), previous != installed?.version,
           servedVersion?() != previous {
            // Not the model an install falling back from its delta already fetched.
            try directory.dropPrevious(keepingModel: existingModelFolder(manifest).map { ($0 as NSString).lastPathComponent })
            state.previousDropped = previous
            logger.notice("removed previous version \(previous) to make room for version \(manifest.version) (\(overBudget ? "max_disk_bytes" : "free disk space")); no rollback until the next install")
            // Measured again whole: a delta that would have brought the previous version's
            // index up to date now copies the live one.
            measure()
        }
        try ensureFits(needed, beside: used, version: manifest.version, unfetched: unfetched)
    }

    /// Refuses a delta's result that leaves the data directory past `max_disk_bytes` (its
    /// `.partial` folder counted): the install then falls back to the full snapshot. The
    /// estimate `makeRoom` checked counts a delta's growth of the index as its uncompressed size,
    /// but FTS5 may merge segments during the apply, writing the merged one before it frees
    /// the inputs: in `DiskBudgetTests` a 99,560-byte delta grew the file by 434,176 bytes, where
    /// a full snapshot's index held 303,104.
    func checkBudgetAfterDelta() throws(SyncError) {
        guard let budget = configuration.maxDiskBytes else { return }
        let used = directory.contentBytes()
        guard used <= budget else {
            throw SyncError(.diskBudget, "the delta's result leaves \(used) bytes in the data directory and max_disk_bytes is \(budget)")
        }
    }

    /// Throws `disk_budget` when `needed` more bytes beside `used` (measured only under a
    /// budget: it walks the data directory) would pass `max_disk_bytes`; `unfetched` says what
    /// the refusal leaves undownloaded.
    func ensureFits(_ needed: Int64, beside used: @autoclosure () -> Int64, version: Int,
                    unfetched: String = "nothing was downloaded") throws(SyncError) {
        guard let budget = configuration.maxDiskBytes else { return }
        let used = used()
        guard used + needed > budget else { return }
        throw SyncError(.diskBudget, "version \(version) needs \(needed) bytes beside the \(used) in use and max_disk_bytes is \(budget); \(unfetched)")
    }

    /// Refuses before downloading when the file system holding the data directory lacks room.
    func checkDiskSpace(manifest: Manifest, path: SyncPlanner.Path, installed: InstalledVersion?) throws(SyncError) {
        let needed = installBytes(manifest: manifest, path: path, installed: installed, margin: configuration.freeSpaceMargin)
        let available: Int64
        do { available = try FileSystem.availableBytes(at: directory.path) } catch {
            throw SyncError(.io, "cannot measure free disk space: \(error.reason)", cause: error)
        }
        guard available >= needed else {
            throw SyncError(.diskFull, "version \(manifest.version) needs \(needed) free bytes, \(available) are available; nothing was downloaded")
        }
    }

    /// `versions/<n>/spare.sqlite` (`keepSpare`).
    nonisolated func spare(of version: InstalledVersion) -> String {
        version.directory + "/" + DataDirectoryLayout.spareIndexFile
    }

    static func fsyncFile(_ path: String) throws(SyncError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SyncError.system("cannot open \(path) to fsync it") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw SyncError.system("cannot fsync \(path)") }
    }
}

/// The model folders that a channel of this process is fetching, by `Syncer.modelFetchKey`:
/// another channel of the same cairnd that needs the same one waits, then links it rather than
/// download it too (`Syncer.ensureModel`).
final class ModelFetches: Sendable {
    static let shared = ModelFetches()
    /// How long a channel waits for another's fetch of a model before fetching it itself.
    static let waitLimit = Duration.seconds(600)
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, Never>
    }
    private struct State {
        var fetching: [String: [Waiter]] = [:]
        /// Waits let go before they parked (their limit passed first, or they were cancelled).
        var released: Set<UInt64> = []
    }
    private let state = Mutex(State())
    private let nextID = Atomic<UInt64>(0)

    /// Marks `key` as fetched by the caller, who must call `end`; false when another fetches it.
    func begin(_ key: String) -> Bool {
        state.withLock { state in
            guard state.fetching[key] == nil else { return false }
            state.fetching[key] = []
            return true
        }
    }

    /// Ends the fetch of `key`: whoever waits for it goes on.
    func end(_ key: String) {
        for waiter in state.withLock({ $0.fetching.removeValue(forKey: key) }) ?? [] { waiter.continuation.resume() }
    }

    /// Returns once no fetch of `key` runs, after `limit`, or when the task is cancelled (its
    /// timer, a child task that runs where the caller's tasks run, then ends at once).
    func wait(for key: String, atMost limit: Duration) async {
        let id = nextID.add(1, ordering: .relaxed).newValue
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.park(key, id) }
            group.addTask { try? await Task.sleep(for: limit) }
            await group.next()
            // The limit passed, the fetch ended, or the wait was cancelled: it goes on.
            release(key, id)
            group.cancelAll()
        }
        // Both children have ended: a mark `release` left is no longer read.
        state.withLock { _ = $0.released.remove(id) }
    }

    /// Returns when `end(key)` or `release(key, id)` lets it go (before or after it parks); at
    /// once when no fetch runs.
    private func park(_ key: String, _ id: UInt64) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.released.remove(id) != nil { return true }
                guard state.fetching[key] != nil else { return true }
                state.fetching[key]!.append(Waiter(id: id, continuation: continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Lets wait `id` go: resumes it when parked, else marks it so that it does not park.
    private func release(_ key: String, _ id: UInt64) {
        let waiter = state.withLock { state -> Waiter? in
            if let index = state.fetching[key]?.firstIndex(where: { $0.id == id }) { return state.fetching[key]!.remove(at: index) }
            state.released.insert(id)
            return nil
        }
        waiter?.continuation.resume()
    }

    /// Whether a channel fetches `key` now.
    func isFetching(_ key: String) -> Bool { state.withLock { $0.fetching[key] != nil } }

    /// How many wait for the fetch of `key` (tests).
    func waiting(for key: String) -> Int { state.withLock { $0.fetching[key]?.count ?? 0 } }

    /// Marks left by `release` (tests: none once every wait has returned).
    var marks: Int { state.withLock { $0.released.count } }
}
