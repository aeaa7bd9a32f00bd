import CairnCore
import CairnStore
import Foundation
import Logging

extension DataDirectory {
    /// Start-up clean-up after a crash at any instant: drops temporary links, makes `current`
    /// name a complete version (falling back to `previous`), removes every version folder not
    /// referenced by `current`/`previous`, half-built model folders, and staging files other
    /// than resumable downloads (`<sha256>.partial`). Returns the version to serve.
    ///
    /// A linked folder is complete (the swap links only what was renamed into place), so one
    /// that does not read (a damaged manifest or index, or a manifest from a newer cairnd than
    /// this one) is not removed when no other version can serve instead: its links and folder
    /// stay, nothing is served from it, and it serves again once it reads (the newer cairnd
    /// back); a sync meanwhile installs a version beside it, or over it when it is the same one.
    /// One a newer cairnd installed (a downgrade) is kept under `newer` while `previous` becomes
    /// `current`; without `previous`, its links stay (protocol/data-directory.md, "A downgrade").
    @discardableResult
    public func recover() throws(SyncError) -> InstalledVersion? {
        for name in ["current.tmp", "previous.tmp", "newer.tmp"] { unlink(path + "/" + name) }
        if !readOnly {
            changeLinks("a replaced copy moved back") { () throws(SyncError) in try restoreReplacedCopies() }
            changeLinks("the version a newer cairnd installed made current again") { () throws(SyncError) in try restoreNewer() }
        }
        let currentTarget = linkTarget(currentLink), previousTarget = linkTarget(previousLink)
        var unreadable: SyncError?
        var current: String?
        if let currentTarget {
            do throws(SyncError) { _ = try readVersion(currentTarget); current = currentTarget } catch { unreadable = error }
        }
        // A manifest that cannot be read now (`cannotReadNow`: EIO, EACCES) says nothing of its
        // version: its link stays, or the clean-up below would remove the folder for good.
        var previous: String?
        var previousKept = false
        if let previousTarget {
            do throws(SyncError) { _ = try readVersion(previousTarget); previous = previousTarget } catch {
                previousKept = Self.cannotReadNow(error)
                if previousKept {
                    logger.error("the previous version cannot be read now; it is kept, and rollback to it waits until it reads",
                                 metadata: ["cairn.sync.version": "\(previousTarget)", "cairn.error": "\(error.message)"])
                }
            }
        }
        let currentKept = unreadable.map(Self.cannotReadNow) ?? false
        if currentKept, let unreadable {
            logger.error("the current version cannot be read now; it is kept with every link, the previous version serves meanwhile if it opens, and it is read again at the next sync",
                         metadata: ["cairn.sync.version": "\(currentTarget!)", "cairn.error": "\(unreadable.message)"])
        } else if current == nil, let previous, let currentTarget, unreadable?.code == .unsupportedFormat, !readOnly {
            // A downgrade: the version a newer cairnd installed is not damage. It is kept under
            // `newer`, `previous` becomes `current` (so installs, rollback, export and the disk
            // budget all see the version that serves), and the upgrade back serves it again.
            // Each step made durable before the next: a power cut keeps a link to every version.
            changeLinks("the previous version made current") { () throws(SyncError) in
                try replaceLink(newerLink, with: currentTarget)
                try syncFolder(path)
                try replaceLink(currentLink, with: previous)
                try syncFolder(path)
                unlink(previousLink)
                try syncFolder(path)
                logger.error("the current version was installed by a newer cairnd; it is kept (the newer link), and the previous version serves until cairnd is upgraded",
                             metadata: ["cairn.sync.version": "\(previous)", "cairn.error": "\(unreadable!.message)"])
            }
        } else if current == nil, previous != nil, readOnly {
            // The links cannot change: `current` stays, and the daemon serves `previous` while
            // `current` cannot be opened, as for any version that does not open.
            logger.error("the current version does not read, and the read-only data directory keeps its links; the previous version serves if it opens",
                         metadata: ["cairn.sync.version": "\(previous!)", "cairn.error": "\(unreadable.map(\.message) ?? "")"])
        } else if current == nil, previous != nil {
            logger.error("the current version does not read; falling back to the previous one",
                         metadata: ["cairn.sync.version": "\(previous!)", "cairn.error": "\(unreadable.map(\.message) ?? "")"])
            changeLinks("current pointed at the previous version") { () throws(SyncError) in try fallBackToPrevious() }
        } else if let unreadable {
            logger.error("the installed version does not read; it is kept, and nothing is served from it until it does or a sync installs one",
                         metadata: ["cairn.sync.version": "\(currentTarget!)", "cairn.error": "\(unreadable.message)"])
        } else if !readOnly {
            if current == nil { unlink(currentLink) }
            if !previousKept, previous == nil || previous == current { unlink(previousLink) }
            changeLinks("the links made durable") { () throws(SyncError) in try syncFolder(path) }
        }

        removeUnreferenced(keepingResumableDownloads: true)
        removeTemporaryFiles()

        let installed = installed()
        // Damage that leaves the manifest readable (a digit of a hash) serves on: the index was
        // checked at its install; the manifest is only said, so that a failing card is seen.
        if let installed, let damage = manifestDamage(of: installed) {
            logger.error("\(installed.manifestPath) changed on the disk since its install (\(damage)); it still reads, so version \(installed.version) serves if its index opens; an export refuses it until a sync writes it again from a source offering that version",
                         metadata: ["cairn.sync.version": "\(installed.version)"])
        }
        var state = readState()
        // A rollback records its held-back version before it swaps: equal to the installed one,
        // the swap never happened. (A hold equal to it for another reason, the held-back
        // version installed with nothing else installed, or one whose signers a rotation
        // removed, has no effect left: lifting it changes nothing.)
        let unfinishedRollback = state.heldBackVersion != nil && state.heldBackVersion == installed?.version
        // A current version kept unread is still the one installed: the state stays as it is.
        if !currentKept, state.installedVersion != installed?.version || unfinishedRollback {
            if state.installedVersion != installed?.version { state.forgetManifestETags() }
            state.setInstalled(installed)
            if unfinishedRollback { state.liftHold() }
            // A full or read-only disk must not stop the start: the state is kept in memory and
            // written by the next change that can write it.
            do { try writeState(state) } catch {
                logger.error("the sync state cannot be saved now; it is kept in memory and saved at the next change: \(error.message)")
            }
        }
        return installed
    }

    /// Runs a change of the links at start-up. One that fails (EIO from a failing card, no
    /// room for a link) is said, and start-up goes on with the links as they stand, each naming
    /// a complete version: cairnd serves what they name, or `previous` while `current` does
    /// not read, rather than refusing to start at every try.
    private func changeLinks(_ what: String, _ change: () throws(SyncError) -> Void) {
        do { try change() } catch {
            logger.error("the data directory's links cannot be changed now (\(what)); they stay as they are: \(error.message)")
        }
    }

    /// The upgrade back: the version `newer` names (one a newer cairnd installed, kept by a
    /// downgraded one) becomes `current` again once it reads and is newer than `current`, which
    /// becomes `previous`. `newer` goes when `current` is that version or a later one.
    func restoreNewer() throws(SyncError) {
        guard let newer = linkTarget(newerLink) else { return }
        let current = linkTarget(currentLink)
        let serving = current.flatMap(loadVersion)
        guard newer != current, FileSystem.exists(path + "/" + newer),
              serving.map({ $0.version < DataDirectoryLayout.versionNumber(of: newer) ?? 0 }) ?? true else {
            unlink(newerLink)
            return
        }
        guard let back = loadVersion(newer) else {
            // Its manifest damaged, not a newer cairnd's (a downgrade before 2026-12-07 kept such
            // a version too): the link goes, its folder with what is unreferenced, and a sync
            // installs it. Only on that verdict: a read that fails (EIO, EACCES) keeps it.
            let manifest = path + "/" + newer + "/" + DataDirectoryLayout.manifestFile
            guard let bytes = try? FileSystem.read(manifest) else {
                logger.warning("the version the newer link names cannot be read now (\(manifest)); it is kept")
                return
            }
            do {
                _ = try judgeManifest(bytes, of: newer)
                logger.warning("the version the newer link names has no \(DataDirectoryLayout.indexFile) now; it is kept")
            } catch where error.code == .io {
                unlink(newerLink)
                try syncFolder(path)
                logger.error("the version the newer link names does not read; it is dropped: \(error.message)")
            } catch {
                // A newer cairnd's, as the link says: status tells to upgrade.
            }
            return
        }
        let before = linkTarget(previousLink)
        if let current { try replaceLink(previousLink, with: current) }
        do { try replaceLink(currentLink, with: newer) } catch {
            // `previous` would name `current`, and the version it named be removed.
            if let before, current != nil { try? replaceLink(previousLink, with: before) }
            throw error
        }
        try syncFolder(path)
        unlink(newerLink)
        try syncFolder(path)
        logger.notice("version \(back.version), which a newer cairnd installed, serves again")
    }

    /// Drops the `newer` link (its folder goes with what is unreferenced); the folder's name, or
    /// nil when there was none.
    @discardableResult
    func dropNewer() -> String? {
        guard let newer = linkTarget(newerLink) else { return nil }
        unlink(newerLink)
        return newer
    }

    /// Points `current` at the version `previous` names and drops `previous` (links only; the
    /// version `current` named is left to the clean-up of what is unreferenced, and a sync
    /// installs it again). For a `current` that is incomplete after a crash (`recover`), or that
    /// cairnd cannot serve and so serves the previous version instead (an install or a rollback
    /// whose version does not open, or one found unusable at start-up): the links then name
    /// what is served, and nothing removes it. Returns the version now current; nil, with
    /// nothing changed, when there is no complete previous version to fall back to.
    @discardableResult
    public func fallBackToPrevious() throws(SyncError) -> InstalledVersion? {
        guard let target = linkTarget(previousLink), target != linkTarget(currentLink), loadVersion(target) != nil else { return nil }
        try replaceLink(currentLink, with: target)
        unlink(previousLink)
        try syncFolder(path)
        return installed()
    }

    /// Whether an install of version `version` moved a folder of the same number aside
    /// (`versions/<n>.replaced`), which the daemon serves until the new one is handed over.
    public func hasReplacedCopy(of version: Int) -> Bool {
        FileSystem.exists(versionsPath + "/\(version)" + DataDirectoryLayout.replacedSuffix)
    }

    /// After an install of version `version` over a folder of the same number that the daemon
    /// still serves (a trust recovery's, a damaged manifest's; `hasReplacedCopy`), when the new
    /// one cannot be served: the new folder goes and the copy moves back in place, so that
    /// `current` names what serves. The links are unchanged (they name `versions/<n>`). False
    /// when there is no such copy.
    public func putBackReplacedCopy(of version: Int) throws(SyncError) -> Bool {
        let final = versionsPath + "/\(version)", aside = final + DataDirectoryLayout.replacedSuffix
        guard FileSystem.exists(aside) else { return false }
        // A `.partial` name: start-up removes it if a crash leaves it.
        let failed = final + ".partial"
        remove(failed)
        guard rename(final, failed) == 0 else { throw SyncError.system("cannot move the folder of version \(version) that cannot be served aside") }
        guard rename(aside, final) == 0 else {
            let undone = rename(failed, final) == 0
            throw SyncError.system("cannot move the folder of version \(version) back from \(aside)\(undone ? "" : "; current names a missing folder until the next install")")
        }
        try syncFolder(versionsPath)
        remove(failed)
        return true
    }

    /// Moves a `versions/<n>.replaced` copy back to `versions/<n>` when a link names that folder
    /// and it is missing: a crash inside an install over a folder of its own number (between its
    /// two renames) or inside `putBackReplacedCopy` leaves that, and the copy is the version that
    /// served. Without this, start-up would fall back to `previous` (or serve nothing) and remove
    /// the copy as unreferenced.
    func restoreReplacedCopies() throws(SyncError) {
        var restored = false
        for link in [currentLink, previousLink, newerLink] {
            guard let target = linkTarget(link), !FileSystem.exists(path + "/" + target) else { continue }
            let aside = path + "/" + target + DataDirectoryLayout.replacedSuffix
            guard FileSystem.exists(aside) else { continue }
            guard rename(aside, path + "/" + target) == 0 else {
                logger.error("\(aside) cannot be moved back to \(target), which \(link) names: \(String(cString: strerror(errno)))")
                continue
            }
            restored = true
            logger.notice("\(target) moved back from \(aside): a stop interrupted an install of its number")
        }
        if restored { try syncFolder(versionsPath) }
    }

    /// Drops `current` when the version it names cannot be served and no previous version can
    /// be served instead (a first install that does not open, or one found unusable at
    /// start-up): the link goes and `DIR` is fsynced; the folder is left to the clean-up of what
    /// is unreferenced. Without this the next attempt would find that version up to date, and
    /// nothing would answer until a newer one was published; now it installs it again.
    public func forgetCurrent() throws(SyncError) {
        guard linkTarget(currentLink) != nil else { return }
        unlink(currentLink)
        unlink(previousLink)
        try syncFolder(path)
    }

    /// Removes what neither `current` nor `previous` references (protocol/data-directory.md,
    /// "Complete means referenced"): other version folders (and `.partial` ones), model folders
    /// neither uses, and staging, except resumable downloads when `keepingResumableDownloads`.
    /// `served`: a version folder (`versions/<n>`) the daemon serves though no link names it (it
    /// serves `previous` while `current` cannot be opened now, and a later step moved the
    /// links): kept, with its model, until it no longer serves.
    func removeUnreferenced(keepingResumableDownloads: Bool, served: String? = nil) {
        removeUnreferencedVersions(keeping: served.map { [versionsPath + "/" + ($0 as NSString).lastPathComponent] } ?? [])
        // A spare copy serves only the next delta from the current version.
        if let previous = linkTarget(previousLink), previous != linkTarget(currentLink) {
            unlink(path + "/" + previous + "/" + DataDirectoryLayout.spareIndexFile)
        }
        removeUnusedModels(served: served)
        for name in entries(stagingPath) where !(keepingResumableDownloads && Self.isResumable(name)) {
            remove(stagingPath + "/" + name)
        }
    }

    /// Removes the version folders (and `.partial` ones) that neither `current` nor `previous`
    /// references, except the folders `keeping` (paths) names: an install's own `.partial`, the
    /// version the daemon serves.
    /// Returns the folder names removed.
    @discardableResult
    func removeUnreferencedVersions(keeping: [String] = [], keepingPartial: Bool = false) -> [String] {
        let keep = Set(([currentLink, previousLink, newerLink].compactMap(linkTarget) + keeping).map { ($0 as NSString).lastPathComponent })
        let removed = entries(versionsPath).filter { !keep.contains($0) && !(keepingPartial && $0.hasSuffix(".partial")) }
        for name in removed { remove(versionsPath + "/" + name) }
        return removed
    }

    /// Removes model folders that neither `current`, `previous` nor the `served` version folder
    /// uses, and half-built ones; never `keeping` (a folder name under `models/`: the one an
    /// install in progress fetched for its new version, not yet linked).
    func removeUnusedModels(served: String? = nil, keeping: String? = nil) {
        let versions = [currentLink, previousLink, newerLink].compactMap(linkTarget) + [served].compactMap { $0 }
        var used: Set<String> = Set([keeping].compactMap { $0 })
        for version in versions {
            let link = path + "/" + version + "/" + DataDirectoryLayout.modelLink
            if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: link) {
                used.insert((target as NSString).lastPathComponent)
                continue
            }
            // A version without a model link (lexical only, or a folder copied in its place)
            // uses none; one whose link cannot be read now (EIO, EACCES: a version kept unread)
            // may use any: nothing goes this time.
            var info = stat()
            let found = lstat(link, &info) == 0
            let code = errno
            guard found ? (info.st_mode & S_IFMT) != S_IFLNK : [ENOENT, ENOTDIR].contains(code) else { return }
        }
        for name in entries(modelsPath) where !used.contains(name) {
            remove(modelsPath + "/" + name)
        }
    }

    /// Removes the resumable downloads in staging whose content hash is not in `wanted` (an
    /// abandoned download of a version since superseded) and returns the bytes freed.
    func removeDownloads(notIn wanted: Set<ContentID>) -> Int64 {
        let names = Set(wanted.map { $0.hex + ".partial" })
        var freed: Int64 = 0
        for name in entries(stagingPath) where Self.isResumable(name) && !names.contains(name) {
            let item = stagingPath + "/" + name
            let size = Downloader.fileSize(item)
            if unlink(item) == 0 { freed += size }
        }
        return freed
    }

    /// Removes what a killed write left in `DIR`, `DIR/roots` and the version folders kept: an
    /// atomic write's `.tmp-<uuid>` (state.json, a manifest, a root) and a rows file's
    /// `<name>.tmp-<pid>-<n>` (a start-up scan writes one of a version's size). Only at start-up,
    /// under the lock.
    func removeTemporaryFiles() {
        let folders = [path, rootsPath] + [currentLink, previousLink, newerLink].compactMap(linkTarget).map { path + "/" + $0 }
        for folder in folders {
            for name in entries(folder) where name.contains(".tmp-") {
                remove(folder + "/" + name)
            }
        }
    }

    /// The bytes held in staging by downloads kept to resume (`<sha256>.partial`).
    public func resumableDownloadBytes() -> Int64 {
        entries(stagingPath).filter(Self.isResumable).reduce(0) { $0 + Downloader.fileSize(stagingPath + "/" + $1) }
    }

    /// A download named by its content hash can be resumed from any source.
    static func isResumable(_ name: String) -> Bool {
        guard name.hasSuffix(".partial") else { return false }
        let hex = name.dropLast(".partial".count)
        return hex.count == 64 && hex.allSatisfy { ("0"..."9").contains($0) || ("a"..."f").contains($0) }
    }

    /// Points `link` at `target` atomically: a symlink at `<link>.tmp`, renamed over `link`.
    func replaceLink(_ link: String, with target: String) throws(SyncError) {
        let temporary = link + ".tmp"
        unlink(temporary)
        guard symlink(target, temporary) == 0, rename(temporary, link) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw SyncError(.io, "cannot point \(link) at \(target): \(reason)")
        }
    }

    func syncFolder(_ folder: String) throws(SyncError) {
        do { try FileSystem.syncDirectory(folder) } catch {
            throw SyncError(.io, "cannot fsync \(folder): \(error.reason)", cause: error)
        }
    }

    func entries(_ folder: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
    }

    func remove(_ item: String) {
        logger.debug("removing leftover", metadata: ["cairn.sync.path": "\(item)"])
        try? FileManager.default.removeItem(atPath: item)
    }
}
