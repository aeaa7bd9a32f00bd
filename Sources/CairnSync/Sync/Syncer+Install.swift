import CairnCore
import CairnIndex
import CairnStore
import CairnThreads
import Foundation
import Logging

extension Syncer {
    /// Downloads what `path` needs, builds `versions/<n>.partial/` beside the live version,
    /// checks it (state root, canaries) in the pass that loads its rows for the query path,
    /// renames it into place and swaps `current`. Returns the installed version and those rows.
    /// On any failure the partial folder is removed and the live version is untouched. `state`
    /// records a previous version removed to make room for a fallback to the full snapshot.
    func install(manifest: Manifest, bytes: [UInt8], path: SyncPlanner.Path, base: String, installed: InstalledVersion?,
                 state: inout SyncState, timings: inout InstallTimings) async throws(SyncError) -> (InstalledVersion, IndexContents) {
        try checkDiskSpace(manifest: manifest, path: path, installed: installed)
        progress.downloading(version: manifest.version, expecting: bytesToDownload(manifest: manifest, path: path))
        let model = try await ensureModel(manifest, base: base)
        if let model { onModel(model) }
        let partial = "\(directory.versionsPath)/\(manifest.version).partial"
        try? FileManager.default.removeItem(atPath: partial)
        do {
            // Made durable by its rename and the versions folder's fsync (`finish`).
            try FileSystem.makeDirectory(partial, syncingParents: false)
            // Written now, fsynced by `finish` (by then its pages are on their way).
            try FileSystem.writeNew(bytes, to: partial + "/" + DataDirectoryLayout.manifestFile)
        } catch {
            try? FileManager.default.removeItem(atPath: partial)
            throw SyncError.writing("cannot create \(partial): \(error.message)", error)
        }
        let index = partial + "/" + DataDirectoryLayout.indexFile
        let clock = ContinuousClock()
        do {
            let start = clock.now
            let made = try await buildIndex(manifest: manifest, path: path, base: base, installed: installed, index: index,
                                            state: &state)
            let built = clock.now
            let contents: IndexContents
            if let derived = made.rows { contents = derived } else {
                contents = try await IndexBuilder.check(index: index, manifest: manifest, byDelta: made.byDelta,
                                                        readingDirect: made.writtenDirect)
            }
            let verified = clock.now
            let ranking = configuration.ranking
            try await BackgroundWork.run { () throws(SyncError) in
                try IndexBuilder.runCanaries(manifest.canaries, index: index, contents: contents, modelDirectory: model,
                                             maximumTokens: manifest.model.maxTokens, ranking: ranking)
            }
            let checked = clock.now
            // fsyncs and renames: on an install thread, not on the cooperative threads.
            let version = try await BackgroundWork.run { () throws(SyncError) in
                try self.finish(manifest: manifest, partial: partial, model: model)
            }
            // The staging name a verified snapshot kept until the swap (`buildIndex`) goes now.
            if !made.byDelta { unlink(stagedBlobPath(manifest.snapshot.sha256)) }
            timings.path = !made.byDelta ? "full" : made.inPlace ? "delta-in-place" : "delta-on-copy"
            timings.fetch = made.fetch
            timings.build = built - start - made.fetch
            timings.delta = made.delta
            timings.verify = verified - built
            timings.canaries = checked - verified
            timings.swap = clock.now - checked
            return (version, contents)
        } catch {
            try? FileManager.default.removeItem(atPath: partial)
            throw error
        }
    }

    /// The folder (`versions/<n>`) of the version the daemon serves, when it says: never removed
    /// as unreferenced (it serves `previous` while `current` cannot be opened).
    var servedFolder: [String] { servedVersion?().map { [DataDirectoryLayout.versionFolder($0)] } ?? [] }

    /// Removes what an install left unreferenced: the version before the previous one, models
    /// neither uses, staging. Called once the query path serves the new version, so that the
    /// install hands it over sooner; a crash before leaves them to start-up recovery.
    func removeUnreferenced() async {
        let clock = ContinuousClock()
        let start = clock.now
        let directory = self.directory
        let served = servedVersion?().map(DataDirectoryLayout.versionFolder)
        await BackgroundWork.run { directory.removeUnreferenced(keepingResumableDownloads: false, served: served) }
        logger.debug("removed unreferenced versions, models and staging",
                     metadata: ["cairn.sync.cleanup_ms": "\((clock.now - start).milliseconds)"])
    }

    /// The new index file: the delta applied to the previous version's file brought up to date
    /// in place or to a copy of the installed index, falling back to the full snapshot when the
    /// delta cannot be fetched or does not apply. Says whether the delta made it, how long
    /// downloading and hashing blobs took, and the new rows when the delta path derived them.
    private func buildIndex(manifest: Manifest, path: SyncPlanner.Path, base: String, installed: InstalledVersion?,
                            index: String, state: inout SyncState) async throws(SyncError) -> BuiltIndex {
        let clock = ContinuousClock()
        var fetch = Duration.zero
        if case .delta(let ref) = path, let installed {
            // The kept delta's rows are read ahead while the new delta downloads.
            let prepared = IndexBuilder.prepare(reusableFile(installed: installed), installed: installed, scratch: index + ".kept-delta")
            let stagedBefore = stagedBytes(path)
            do throws(SyncError) {
                let started = clock.now
                let blob = try await fetchBlob(base: base, id: ref.sha256, size: ref.size)
                fetch += clock.now - started
                progress.installing()
                await checkInstalledFile()
                let rows = installedRows
                let result = try await BackgroundWork.run { () throws(SyncError) -> IndexBuilder.DeltaResult in
                    try IndexBuilder.applyDelta(blob: blob, ref: ref, manifest: manifest, installed: installed,
                                                installedRows: rows, prepared: prepared, to: index)
                }
                try checkBudgetAfterDelta()
                // Kept for the next delta, which brings this file up to date in place (a rename).
                let kept = (index as NSString).deletingLastPathComponent + "/" + DataDirectoryLayout.deltaBlobFile
                guard rename(blob, kept) == 0 else { throw SyncError.system("cannot keep the delta blob in \(kept)") }
                deltaStalls = nil
                return BuiltIndex(byDelta: true, inPlace: result.reused, fetch: fetch, rows: result.contents, delta: result.phases,
                                  writtenDirect: false)
            } catch {
                // The read-ahead's threads are done (`applyDelta` waited, unless the download
                // failed) before anything below removes or moves a file.
                if let prepared { await BackgroundWork.run { prepared.wait() } }
                // A full disk will not take the larger snapshot either. Nor does a link that cut
                // the delta carry the snapshot, tens of times its size, from the same source any
                // better: the delta resumes (or is asked again) at the next attempt, and the spare
                // and the previous version are not dropped for nothing. A delta the source does not
                // give (a file it does not hold or holds cut short, an HTTP status, a stick without
                // it, refused credentials) falls back.
                // A source cut for its pace (a later one takes the delta over) would send the
                // snapshot no faster.
                if error.code == .cancelled || error.code == .diskFull || error.cause is Downloader.SlowSource { throw error }
                // Rows that cannot be mapped now (no memory or address space) would fail the
                // snapshot's the same way, after its download. A delta applied in place took the
                // previous version's index: what is left of its folder is no one's.
                if Self.cannotOpenRowsNow(error) {
                    directory.removeUnreferencedVersions(keeping: [(index as NSString).deletingLastPathComponent] + servedFolder)
                    throw error
                }
                // A server that does not hold the delta (a mirror that copies snapshots only), or
                // holds a copy of another size: a later source may, and its snapshot is tens of
                // times larger (the bytes held, kept, are resumed there). This one is asked again
                // after the others, for the snapshot then. Not a stick: its bytes are free.
                if deltaHandOver, error.cause is Downloader.NotHeld || error.cause is Downloader.WrongSize, SourceURL.filePath(base) == nil {
                    throw SyncError(error.code, "\(error.message) (the delta); the next source is asked for it before this one's snapshot",
                                    cause: Downloader.DeltaElsewhere())
                }
                // So too a link that failed before the delta's first byte (down once the manifest
                // came, a connect timeout; until 2026-12-07 this fell back), a few attempts in a
                // row: a failure there every time is the delta's (a server that resets that one
                // file), and the snapshot is tried. Not a stick's: its bytes are free, and one
                // that fails before adding any (a bad sector) falls back at once.
                if error.code == .network, !(error.cause is Downloader.NotHeld) {
                    if stagedBytes(path) > stagedBefore {
                        deltaStalls = nil
                        throw error
                    }
                    let stalls = (deltaStalls?.sha == ref.sha256 ? deltaStalls!.count : 0) + 1
                    deltaStalls = (ref.sha256, stalls)
                    if SourceURL.filePath(base) == nil, stalls < Self.deltaStallsBeforeFallBack { throw error }
                    deltaStalls = nil
                }
                logger.info("delta path failed; falling back to the full snapshot",
                            metadata: ["cairn.sync.error": "\(error.code)", "cairn.sync.reason": "\(error.message)"])
                // The delta's rows files too: a full install writes its own base and no overlay.
                for file in [index, IndexContents.basePath(beside: index), IndexContents.overlayPath(beside: index)] { unlink(file) }
                // The spare stays unless the snapshot needs its room (`makeRoom`): a page answered
                // for the delta is likely answered for the snapshot too, and a spare removed for
                // nothing is a copy of the whole index to make again. Once the snapshot installs,
                // the spare is the previous version's, and goes (`removeUnreferenced`).
                // A delta applied in place took the previous version's index and dropped its
                // link: what is left of its folder is no one's.
                // Never the version the daemon serves (`previous`, while `current` cannot be opened).
                directory.removeUnreferencedVersions(keeping: [(index as NSString).deletingLastPathComponent] + servedFolder)
                // `makeRoom` measured the delta's path, which may have kept the previous version:
                // the snapshot is measured again, and may need it gone.
                let full = SyncPlanner.Path.full(manifest.snapshot)
                try makeRoom(manifest: manifest, path: full, installed: installed, state: &state,
                             unfetched: "the snapshot was not downloaded")
                try checkDiskSpace(manifest: manifest, path: full, installed: installed)
                progress.expect(Int64(manifest.snapshot.size) - stagedBytes(.full(manifest.snapshot)))
            }
        }
        let started = clock.now
        // A large index is written, and then checked, around the page cache: its pages would
        // push out the serving version's. A small one stays cached for its check.
        let direct = configuration.directInstallMinimumBytes.map { Int64(manifest.snapshot.uncompressedSize) >= $0 } ?? false
        let blob = try await fetchSnapshot(base: base, snapshot: manifest.snapshot, index: index, bypassingCache: direct)
        fetch += clock.now - started
        progress.installing()
        // Kept for `cairn export`: the verified, signed bytes (a link, not a copy). The staging
        // name stays until the swap: an install killed or refused before it (its checks take
        // seconds at a million rows) finds the blob whole at the next attempt, not a download
        // of gigabytes again. Where the file system has no hard links, a rename.
        let kept = (index as NSString).deletingLastPathComponent + "/" + DataDirectoryLayout.snapshotBlobFile
        guard link(blob, kept) == 0 || rename(blob, kept) == 0 else { throw SyncError.system("cannot keep the snapshot blob in \(kept)") }
        return BuiltIndex(byDelta: false, inPlace: false, fetch: fetch, rows: nil, delta: nil, writtenDirect: direct)
    }

    /// Waits for the start-up check of the installed file against its rows files (once); if the
    /// file no longer holds them, forgets the rows, so that the delta is checked over the file's
    /// stored hashes.
    private func checkInstalledFile() async {
        guard let check = installedFileCheck else { return }
        installedFileCheck = nil
        guard await BackgroundWork.run({ check.wait() }) else {
            logger.error("the installed index no longer holds the rows it was installed with; the delta is checked against the file's own hashes")
            installedRows = nil
            return
        }
    }

    /// What `buildIndex` made, and how.
    private struct BuiltIndex {
        /// Whether a delta made it (else the full snapshot).
        let byDelta: Bool
        /// Whether the delta was applied to the previous version's file in place (else to a copy).
        let inPlace: Bool
        /// Time spent downloading and hashing blobs.
        let fetch: Duration
        /// The new rows when the delta path derived them from the installed version's.
        let rows: IndexContents?
        /// The delta's phases, when a delta made it.
        let delta: IndexBuilder.DeltaPhases?
        /// Whether the index was written around the page cache (a large full snapshot's), so
        /// that its check reads it so too.
        let writtenDirect: Bool
    }

    /// A file a delta can bring up to date in place instead of copying the live index: the
    /// installed version's spare copy (`keepSpare`), else the `previous` version's index when
    /// the installed version's folder keeps the delta that took `previous` to it.
    func reusableFile(installed: InstalledVersion) -> IndexBuilder.ReusableFile? {
        if FileSystem.exists(spare(of: installed)) { return IndexBuilder.ReusableFile(path: spare(of: installed), catchUp: nil) {} }
        let blob = installed.directory + "/" + DataDirectoryLayout.deltaBlobFile
        // Never the file the daemon serves (`previous`, while `current` cannot be opened): its
        // readers would see it change under them.
        guard let previous = directory.previous(), previous.version < installed.version, FileSystem.exists(blob),
              servedVersion?() != previous.version,
              let ref = installed.manifest.deltas.first(where: {
                  $0.fromVersion == previous.version && $0.fromStateRoot == previous.stateRoot
              }) else { return nil }
        let directory = self.directory
        return IndexBuilder.ReusableFile(path: previous.indexPath, catchUp: .init(version: previous, blob: blob, ref: ref)) { () throws(SyncError) in
            // Unreferenced first: a crash from here on leaves a folder that start-up removes.
            try directory.unlinkPrevious()
            try directory.syncFolder(directory.path)
        }
    }

    /// Writes the model link, fsyncs the manifest (written by `install`), the index and the
    /// folder, renames the folder into place and swaps the links (`previous` first, then
    /// `current`, so both always name complete versions). What is no longer referenced is
    /// removed after the query path has the new version (`removeUnreferenced`).
    private nonisolated func finish(manifest: Manifest, partial: String, model: String?) throws(SyncError) -> InstalledVersion {
        let name = "\(manifest.version)"
        let final = "\(directory.versionsPath)/\(name)"
        var movedAside = false
        do {
            try Self.fsyncFile(partial + "/" + DataDirectoryLayout.manifestFile)
            if let model {
                guard symlink("../../\(DataDirectoryLayout.modelsFolder)/\((model as NSString).lastPathComponent)",
                              partial + "/" + DataDirectoryLayout.modelLink) == 0 else {
                    throw SyncError.system("cannot create the model link in \(partial)")
                }
            }
            try Self.fsyncFile(partial + "/" + DataDirectoryLayout.indexFile)
            // The rows files: the base (written by the install's scan, or a link to the installed
            // version's, already durable) and a delta's overlay.
            for rows in [DataDirectoryLayout.rowsFile, DataDirectoryLayout.overlayRowsFile]
            where FileSystem.exists(partial + "/" + rows) {
                try Self.fsyncFile(partial + "/" + rows)
            }
            if FileSystem.exists(partial + "/" + DataDirectoryLayout.snapshotBlobFile) {
                try Self.fsyncFile(partial + "/" + DataDirectoryLayout.snapshotBlobFile)
            }
            try FileSystem.syncDirectory(partial)
            // Installed over the folder of a version a newer cairnd installed: its link goes first.
            if directory.linkTarget(directory.newerLink) == DataDirectoryLayout.versionFolder(manifest.version) {
                directory.dropNewer()
                try directory.syncFolder(directory.path)
            }
            // A folder of the same number (a trust recovery replacing a thief's version N with
            // the publisher's, a damaged copy) is renamed aside, not removed: it may be the one
            // the daemon serves until the new version is handed over, and the clean-up after
            // that removes it (start-up recovery, after a crash).
            // (One left by an earlier install goes first: after this step a `.replaced` copy is
            // this install's, which `fallBack` may put back.)
            let aside = final + DataDirectoryLayout.replacedSuffix
            try? FileManager.default.removeItem(atPath: aside)
            movedAside = FileSystem.exists(final)
            if movedAside {
                guard rename(final, aside) == 0 else { throw SyncError.system("cannot move the folder of version \(name) aside") }
            }
            guard rename(partial, final) == 0 else {
                var error = SyncError.system("cannot rename \(partial) into place")
                // Put back what the links name.
                if movedAside, rename(aside, final) != 0 {
                    error = SyncError.system("cannot rename \(partial) into place, nor move the folder that was version \(name)'s back from \(aside); the links may name a missing folder until the next install")
                }
                throw error
            }
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError.writing("cannot finish installing version \(name): \(error)", error)
        }
        do {
            return try swapLinks(to: manifest)
        } catch {
            // The folder of the same number, when it serves (a thief's version a trust recovery
            // replaces), goes back in place: else the next attempt would find its number
            // installed, hand nothing over, and it would serve until a restart. One that does
            // not serve (kept unread) stays replaced: `current` names the new copy.
            if movedAside, servedVersion?() == manifest.version {
                do { _ = try directory.putBackReplacedCopy(of: manifest.version) } catch let putBack {
                    logger.error("version \(name) did not finish installing, and the folder it replaced cannot be put back: \(putBack.message)")
                }
            }
            throw error
        }
    }

    /// `finish`'s last steps, once the new folder is in place: the folder made durable, the
    /// links swapped, and the version read back.
    private nonisolated func swapLinks(to manifest: Manifest) throws(SyncError) -> InstalledVersion {
        let name = "\(manifest.version)"
        do { try FileSystem.syncDirectory(directory.versionsPath) } catch {
            throw SyncError.writing("cannot finish installing version \(name): \(error.message)", error)
        }
        let target = DataDirectoryLayout.versionFolder(manifest.version)
        // The rollback target is the version the daemon serves: `current` but for one kept
        // that cannot be opened now (`CannotOpenNow`), when the version before it answers. That
        // one must stay linked, or a restart's clean-up would remove the folder it serves.
        let served = servedVersion?().map(DataDirectoryLayout.versionFolder).flatMap {
            FileSystem.exists(directory.path + "/" + $0) ? $0 : nil
        }
        if let old = served ?? directory.linkTarget(directory.currentLink), old != target {
            try directory.replaceLink(directory.previousLink, with: old)
        }
        try directory.replaceLink(directory.currentLink, with: target)
        // A version a newer cairnd installed is superseded by this one (or was its folder).
        if let newer = directory.newerVersion(), newer <= manifest.version {
            directory.dropNewer()
        }
        try directory.syncFolder(directory.path)
        logger.info("installed version", metadata: ["cairn.sync.version": "\(manifest.version)",
                                                    "cairn.sync.state_root": "\(manifest.stateRoot.hex)"])
        guard let installed = directory.installed() else {
            throw SyncError(.io, "the installed version \(name) cannot be read back")
        }
        return installed
    }
}
