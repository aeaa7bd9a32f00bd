public import CairnCore
import CairnStore
import Foundation
public import Logging
import Synchronization

/// The device data directory (protocol/data-directory.md), locked for this process while the
/// value lives: a second `DataDirectory` on the same folder (another cairnd) is refused.
public final class DataDirectory: Sendable {
    public let path: String
    private let lockDescriptor: Int32
    /// Opened on a read-only file system holding an installed version: served as it is; the
    /// links are not changed (`recover`).
    public let readOnly: Bool
    /// The newest state when `state.json` does not hold it: its write failed (a full or
    /// read-only disk), so that status still says why, or an attempt that changed only routine
    /// fields kept it in memory (`keepUnwritten`); nil once a write succeeds.
    private let unsaved = Mutex<SyncState?>(nil)
    /// The state last read whole or written: what a read that fails for a moment (no file
    /// descriptor left under a burst of connections) answers instead of an empty state.
    private let lastGood = Mutex<SyncState?>(nil)
    /// The last `installed()` answer and the folder and manifest file it was read from; for a
    /// manifest that cannot be read now, until when its nil stands.
    private let installedCache = Mutex<(key: String, version: InstalledVersion?, until: ContinuousClock.Instant?)?>(nil)
    /// The last state decoded from `state.json`, by the file's inode, time and size: every
    /// search reads the state for its flags, and the file changes only by an atomic rename.
    private let stateCache = Mutex<(key: String, state: SyncState)?>(nil)
    /// The top-level fields of the `state.json` last read that this build does not know (a
    /// newer cairnd's, before a downgrade), as a JSON object: written back with the state, so
    /// the upgrade back finds them (a newer build's floor survives the older one's writes).
    private let carried = Mutex<[UInt8]?>(nil)
    /// The unknown fields of `state.json` said at notice so far: once per process, as every
    /// write carries them back (a new file each attempt, which would say them each poll).
    private let unknownFieldsSaid = Mutex<Set<[String]>>([])
    /// The keys that may have signed an installed manifest (`knowManifestSigners`): empty until
    /// the opener names them.
    private let manifestSigners = Mutex<[PublicKey]>([])
    let logger: Logger

    public var versionsPath: String { path + "/" + DataDirectoryLayout.versionsFolder }
    public var modelsPath: String { path + "/" + DataDirectoryLayout.modelsFolder }
    public var stagingPath: String { path + "/" + DataDirectoryLayout.stagingFolder }
    public var statePath: String { path + "/" + DataDirectoryLayout.stateFile }
    public var currentLink: String { path + "/" + DataDirectoryLayout.currentLink }
    public var previousLink: String { path + "/" + DataDirectoryLayout.previousLink }
    public var newerLink: String { path + "/" + DataDirectoryLayout.newerLink }

    /// Whether `path` lies on a mount that is read-only over a writable file system (a
    /// read-only bind mount, as systemd's ProtectSystem=strict makes): its mount options say
    /// `ro`, its super options `rw` (/proc/self/mountinfo, proc(5)).
    static func isReadOnlyView(_ path: String) -> Bool {
        let real = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        let mounts = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
        return ExportRoom.mount(of: real, mountinfo: mounts).readOnlyView
    }

    /// Whether another open lock holds `DIR/lock` (a cairnd running on `path`): probed with a
    /// non-blocking flock, released at once. False when there is no lock file.
    public static func isLockedByAnother(_ path: String) -> Bool {
        let fd = open(path + "/" + DataDirectoryLayout.lockFile, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return errno == EWOULDBLOCK }
        flock(fd, LOCK_UN)
        return false
    }

    /// Creates the folder layout if missing, checks this process may write in it, and takes
    /// `DIR/lock` (flock, exclusive, non-blocking).
    /// - Throws: `SyncError` `.locked` when another process (or another `DataDirectory` in this
    ///   one) holds the lock; `.io`, naming the folder and the fix, when it cannot be created or
    ///   written.
    public init(path: String, logger: Logger) throws(SyncError) {
        do { try FileSystem.makeDirectory(path) } catch {
            throw SyncError(.io, "cannot create the data directory \(path) (\(error.message)); create it with write "
                            + "access for this user or choose another --data-dir", cause: error)
        }
        // A read-only file system holding an installed version (an SD card the kernel remounted
        // read-only after errors): served as it is, no sync until it is writable again (each
        // attempt fails, saying why). Refusing to start left the device answering nothing, and
        // its supervisor restarting it for ever.
        // Not a read-only view of a writable file system (ProtectSystem=strict without the folder
        // in ReadWritePaths=): that is a setting to mend, refused below, naming it. And `current`
        // as a link (lstat), even dangling: recover() falls back to `previous` then.
        var link = stat()
        let readOnly = access(path, W_OK | X_OK) != 0 && errno == EROFS && !Self.isReadOnlyView(path)
            && lstat(path + "/" + DataDirectoryLayout.currentLink, &link) == 0
        if readOnly {
            logger.error("the data directory \(path) is on a read-only file system: the installed version is served, and nothing is synced until it is writable again (remount it read-write; check the disk: the kernel remounts a failing one read-only)")
        }
        self.readOnly = readOnly
        guard readOnly || access(path, W_OK | X_OK) == 0 else {
            // A read-only file system is not a matter of ownership: an SD card the kernel
            // remounted read-only after errors, or the unit's ProtectSystem=strict.
            let remedy = errno == EROFS
                ? "its file system is read-only: remount it read-write (check the disk: the kernel remounts a failing one read-only), under the systemd unit add the folder to ReadWritePaths=, or choose another --data-dir"
                : "give this user write access to it (chown) or choose another --data-dir"
            throw SyncError(.io, "cannot write to the data directory \(path) (\(String(cString: strerror(errno)))); " + remedy)
        }
        for folder in [DataDirectoryLayout.versionsFolder, DataDirectoryLayout.modelsFolder, DataDirectoryLayout.stagingFolder] {
            do { try FileSystem.makeDirectory(path + "/" + folder) } catch {
                throw SyncError(.io, "cannot create the data directory's \(folder) folder (\(error.message))", cause: error)
            }
        }
        // Read-only: flock needs no write access, and a descriptor open for writing would keep
        // the file system from being remounted read-only (which the fault tests do).
        let fd = open(path + "/" + DataDirectoryLayout.lockFile, O_RDONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SyncError(.io, "cannot open \(path)/lock: \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw SyncError(.locked, "another cairnd is using the data directory \(path) (its lock is held); stop it or use another --data-dir")
        }
        self.path = path
        self.lockDescriptor = fd
        self.logger = logger
    }

    deinit { close(lockDescriptor) }

    // MARK: State

    /// The newest state: the one a failed write could not save (a full or read-only disk), else
    /// `state.json`; an empty state when the file is missing. One that is not the JSON of a
    /// state (a damaged disk, a hand edit) is moved aside to `state.json.unreadable`, once, with
    /// an error line: what it held (a held-back version, the clock floor) is lost. One that
    /// cannot be read now (a read error, no file descriptor left) is left as it is: the state
    /// last read or written answers, else an empty one, with an error line.
    public func readState() -> SyncState {
        if let state = unsaved.withLock({ $0 }) { return state }
        var info = stat()
        let key = stat(statePath, &info) == 0 ? "\(info.st_ino) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec) \(info.st_size)" : nil
        if let key, let cached = stateCache.withLock({ $0 }), cached.key == key { return cached.state }
        let bytes: [UInt8]
        do { bytes = try FileSystem.read(statePath) } catch {
            guard error.errno != ENOENT else { return SyncState() }
            if let state = lastGood.withLock({ $0 }) { return state }
            logger.error("\(statePath) cannot be read now (\(error.message)); left as it is, and read again at the next need")
            return SyncState()
        }
        do {
            let state = try JSONDecoder().decode(SyncState.self, from: Data(bytes))
            // Said once per file (the cache holds it by its inode, time and size): fields this
            // build does not know are ignored; fields it knows that do not read are left out,
            // the file copied aside first for a person to read.
            let raw = Self.jsonObject(bytes) ?? [:]
            carried.withLock { $0 = Self.unknownFields(raw) }
            if let left = Self.fieldsLeftOut(raw, state) {
                let unknown = left.filter { SyncState.CodingKeys(stringValue: $0) == nil && !$0.hasPrefix("sources (") }
                let unread = left.filter { !unknown.contains($0) }
                if !unknown.isEmpty, unknownFieldsSaid.withLock({ $0.insert(unknown).inserted }) {
                    logger.notice("\(statePath): \(unknown.joined(separator: ", ")) are not fields this cairnd knows (a newer cairnd's?); kept as they are")
                }
                if !unread.isEmpty {
                    let aside = statePath + ".unreadable"
                    let copied = (try? FileSystem.writeAtomically(bytes, to: aside, mode: 0o600)) != nil
                    logger.error("\(statePath): \(unread.joined(separator: ", ")) could not be read and are left out (edited, or damaged)\(copied ? "; the file is copied to \(aside)" : ""); every other field is kept")
                }
            }
            lastGood.withLock { $0 = state }
            // Kept under the key taken before the read: a file replaced between the two is read
            // again next time (its key differs), never answered stale.
            if let key { stateCache.withLock { $0 = (key, state) } }
            return state
        } catch {
            let aside = statePath + ".unreadable"
            let moved = rename(statePath, aside) == 0
            logger.error("\(statePath) cannot be read (not the JSON of a sync state); \(moved ? "moved to \(aside)" : "left as it is"); starting from an empty sync state: a held-back version, the clock floor and the highest version seen are forgotten")
            return SyncState()
        }
    }

    /// `bytes` as a JSON object, nil when they are not one.
    static func jsonObject(_ bytes: [UInt8]) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any]
    }

    /// The top-level fields of `raw` (a state file's object; not null) that `state` does not
    /// carry: those `SyncState(from:)` could not read, or does not know. Nil when there are none.
    static func fieldsLeftOut(_ raw: [String: Any], _ state: SyncState) -> [String]? {
        guard let kept = (try? JSONEncoder().encode(state)).flatMap({ jsonObject(Array($0)) }) else { return nil }
        var left = raw.filter { !($0.value is NSNull) && kept[$0.key] == nil }.keys.sorted()
        // An entry of `sources` that did not read.
        if let entries = raw["sources"] as? [Any], entries.count != (state.sources?.count ?? 0), !left.contains("sources") {
            left.append("sources (\(entries.count - (state.sources?.count ?? 0)) entries)")
        }
        return left.isEmpty ? nil : left
    }

    /// The top-level fields of `raw` (a state file's object) that `SyncState` does not know, as
    /// a JSON object's bytes; nil when there are none.
    static func unknownFields(_ raw: [String: Any]) -> [UInt8]? {
        let unknown = raw.filter { SyncState.CodingKeys(stringValue: $0.key) == nil }
        guard !unknown.isEmpty, let data = try? JSONSerialization.data(withJSONObject: unknown, options: [.sortedKeys]) else { return nil }
        return Array(data)
    }

    /// `encoded` (the state's JSON) with the `carried` fields added where it has none of its own.
    static func adding(_ carried: [UInt8]?, to encoded: Data) -> Data {
        guard let carried, let extra = jsonObject(carried), var object = jsonObject(Array(encoded)) else { return encoded }
        for (key, value) in extra where object[key] == nil { object[key] = value }
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])) ?? encoded
    }

    /// Keeps `state` as the newest without writing it (`Syncer.persist`): `readState` answers
    /// it until the next write.
    func keepUnwritten(_ state: SyncState) { unsaved.withLock { $0 = state } }

    /// The newest state when `state.json` does not hold it (kept in memory, or its write failed).
    var unwrittenState: SyncState? { unsaved.withLock { $0 } }

    /// Writes `state.json` atomically, with the fields a newer cairnd left there that this build
    /// does not know.
    public func writeState(_ state: SyncState) throws(SyncError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        do throws(StoreError) {
            guard let encoded = try? encoder.encode(state) else { throw StoreError(.io, "the sync state cannot be encoded") }
            let data = Self.adding(carried.withLock { $0 }, to: encoded)
            // The owner's alone: it keeps each source's URL, with any credentials written in it.
            try FileSystem.writeAtomically(Array(data) + [0x0A], to: statePath, mode: 0o600)
            // This process's own write: read again next time, whatever key the new file has (an
            // inode freed and taken again within the clock's tick could repeat the old key).
            stateCache.withLock { $0 = nil }
            unsaved.withLock { $0 = nil }
            lastGood.withLock { $0 = state }
        } catch {
            unsaved.withLock { $0 = state }
            throw SyncError.writing("cannot write \(statePath): \(error.reason)", error)
        }
    }

    // MARK: Versions

    /// The version `current` points at, or nil when nothing is installed. Status asks at every
    /// search: a version folder does not change once complete, so the last one loaded is kept
    /// while `current` names the same folder and its manifest file is the same (inode, time,
    /// size); a swap, a rollback or a re-install loads again.
    public func installed() -> InstalledVersion? {
        guard let target = linkTarget(currentLink) else { return nil }
        var info = stat()
        guard stat(path + "/" + target + "/" + DataDirectoryLayout.manifestFile, &info) == 0 else { return nil }
        let key = "\(target) \(info.st_ino) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec) \(info.st_size)"
        if let cached = installedCache.withLock({ $0 }), cached.key == key, cached.until.map({ .now < $0 }) ?? true {
            return cached.version
        }
        do {
            let loaded = try readVersion(target)
            installedCache.withLock { $0 = (key, loaded, nil) }
            return loaded
        } catch {
            // A manifest that cannot be read now (EIO, EACCES) reads again with its file
            // unchanged (a mode changes only its ctime; a card's error clears): its nil stands
            // 10 s, so that searches (which ask for their flags) do not each wait on a failing
            // card's retries.
            let until: ContinuousClock.Instant? = Self.cannotReadNow(error) ? .now + .seconds(10) : nil
            installedCache.withLock { $0 = (key, nil, until) }
            return nil
        }
    }

    /// Forgets an `installed()` answer kept for a manifest that could not be read now: a sync
    /// attempt reads it again at once (the 10 s are for searches, not for an attempt that a
    /// caller asked for once the file reads again).
    public func forgetUnreadInstalled() {
        installedCache.withLock { if $0?.until != nil { $0 = nil } }
    }

    /// The version `previous` points at, if any.
    public func previous() -> InstalledVersion? {
        linkTarget(previousLink).flatMap(loadVersion)
    }

    /// The bytes an install budget counts: versions, models and staging (not state or other
    /// channels' folders).
    public func contentBytes() -> Int64 {
        [versionsPath, modelsPath, stagingPath].reduce(0) { $0 + DiskUsage.bytes(under: $1) }
    }

    /// The version `previous` names, from its link alone (no files read).
    public func previousVersion() -> Int? {
        linkTarget(previousLink).flatMap(DataDirectoryLayout.versionNumber(of:))
    }

    /// The version `newer` names: one a newer cairnd installed, kept by this one (a downgrade).
    public func newerVersion() -> Int? {
        linkTarget(newerLink).flatMap(DataDirectoryLayout.versionNumber(of:))
    }

    /// Removes the previous version (its link first, then its folder and any model only it
    /// used): `cairn rollback` has nothing to go back to until the next install.
    func dropPrevious(keepingModel model: String? = nil) throws(SyncError) {
        guard let target = linkTarget(previousLink), target != linkTarget(currentLink) else { return }
        try unlinkPrevious()
        try syncFolder(path)
        try? FileManager.default.removeItem(atPath: path + "/" + target)
        removeUnusedModels(keeping: model)
    }

    /// Drops the `previous` link, if there is one (not fsynced; its folder is left to the
    /// clean-up of what is unreferenced).
    func unlinkPrevious() throws(SyncError) {
        guard unlink(previousLink) == 0 || errno == ENOENT else {
            throw SyncError(.io, "cannot remove \(previousLink): \(String(cString: strerror(errno)))")
        }
    }

    /// `versions/<n>` as a link target (relative to DIR).
    func linkTarget(_ link: String) -> String? {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: link) else { return nil }
        return target
    }

    /// A version folder (relative name `versions/<n>`) with its index and manifest; nil if incomplete.
    func loadVersion(_ relative: String) -> InstalledVersion? {
        try? readVersion(relative)
    }

    /// A version folder (relative name `versions/<n>`) with its index and manifest, or why it
    /// is not one: no index, a manifest that cannot be read or parsed (`.io`: damage), or one
    /// written by a newer cairnd than this one (`.unsupportedFormat`).
    func readVersion(_ relative: String) throws(SyncError) -> InstalledVersion {
        let directory = path + "/" + relative
        var info = stat()
        guard stat(directory + "/" + DataDirectoryLayout.indexFile, &info) == 0 else {
            // Only an index that is not there is a verdict: a folder that cannot be searched
            // now (EACCES, EIO) is `cannotReadNow`.
            let code = errno
            throw SyncError(.io, "\(relative) has no \(DataDirectoryLayout.indexFile)"
                            + (code == ENOENT ? "" : " that can be read now: \(String(cString: strerror(code)))"),
                            cause: code == ENOENT ? nil : StoreError(.io, "cannot look up \(directory)", errno: code))
        }
        let bytes: [UInt8]
        do { bytes = try FileSystem.read(directory + "/" + DataDirectoryLayout.manifestFile) } catch {
            throw SyncError(.io, error.message, cause: error)
        }
        let manifest = try judgeManifest(bytes, of: relative)
        // The folder is named for the version its install verified: a manifest naming another
        // changed on the disk since (a digit of its version), and would pass for that version.
        if let named = Int((relative as NSString).lastPathComponent), named != manifest.version {
            throw SyncError(.io, "\(relative)/\(DataDirectoryLayout.manifestFile) names version \(manifest.version): changed on the disk since its install")
        }
        let model = directory + "/" + DataDirectoryLayout.modelLink
        let hasModel = FileSystem.exists(model + "/model.safetensors")
        return InstalledVersion(version: manifest.version, stateRoot: manifest.stateRoot, directory: directory,
                                manifest: manifest, modelDirectory: hasModel ? model : nil)
    }

    /// The manifest of version folder `relative` from its bytes, or why not: `.io` for damage
    /// (not a manifest this build reads, or one of its format whose known signatures all fail),
    /// `.unsupportedFormat` for one a newer cairnd installed.
    func judgeManifest(_ bytes: [UInt8], of relative: String) throws(SyncError) -> Manifest {
        do {
            return try Self.readInstalledManifest(bytes)
        } catch where error.code == .unsupportedFormat {
            if let damage = Self.brokenSignature(bytes, signers: manifestSigners.withLock { $0 }) {
                throw SyncError(.io, "\(relative)/\(DataDirectoryLayout.manifestFile) changed on the disk since its install (\(damage)); it is damage, not a newer cairnd's", cause: error)
            }
            throw SyncError(.unsupportedFormat, "\(relative) was installed by a newer cairnd than this one (\(error.message)); it is kept, and serves again once cairnd is upgraded", cause: error)
        } catch {
            throw SyncError(.io, "\(relative)/\(DataDirectoryLayout.manifestFile) is not a manifest this cairnd reads")
        }
    }

    /// Names the keys that may have signed the installed manifests (the pinned keys, or the
    /// signing keys of every root of the chain), before `recover`: with them a manifest of this
    /// build's format that holds what it does not know is told from damage (`readVersion`).
    public func knowManifestSigners(_ keys: [PublicKey]) {
        manifestSigners.withLock { $0 = keys }
    }

    /// `knowManifestSigners` with what `configuration` trusts: every signing key of the chain
    /// from its pinned root, or its pinned keys.
    public func knowManifestSigners(of configuration: SyncConfiguration) {
        knowManifestSigners(configuration.trustedRoot.map { signingKeysOfChain(pinned: $0) } ?? configuration.trustedKeys)
    }

    /// Why an installed manifest that does not parse as this build's is damage rather than a
    /// newer cairnd's: it claims this build's `format_version`, so its signed bytes are its
    /// canonical JSON under this format's domain, yet no signature in it verifies, and every one
    /// is by a key of `signers`. Nil when it cannot tell (another format, a signature by a key
    /// this device does not know, which may be all a newer cairnd checked; no signers named) or
    /// a known key's signature verifies (intact: a newer cairnd's).
    static func brokenSignature(_ bytes: [UInt8], signers: [PublicKey]) -> String? {
        guard !signers.isEmpty, let envelope = try? SignedManifest.decodeEnvelope(bytes),
              case .object(let fields) = envelope.content,
              fields["format_version"] == .integer(Int64(Manifest.currentFormatVersion)),
              envelope.validSigners(among: signers, domain: SignedManifest.domain).isEmpty else { return nil }
        let known = Set(signers.map(\.keyID))
        guard let claimed = envelope.signatures.first, envelope.signatures.allSatisfy({ known.contains($0.keyID) }) else { return nil }
        return "its signature by key \(claimed.keyID.hex) does not verify"
    }

    /// Why `installed`'s manifest, which still reads, changed on the disk since its install (a
    /// digit of a hash): every signature in it is by a key of the signers named
    /// (`knowManifestSigners`) and none verifies. Nil when it verifies, or when that cannot be
    /// told (no signers named, a key the device does not know, the file unreadable now).
    public func manifestDamage(of installed: InstalledVersion) -> String? {
        guard let bytes = try? manifestBytes(of: installed) else { return nil }
        return Self.brokenSignature(bytes, signers: manifestSigners.withLock { $0 })
    }

    /// The bytes of `installed`'s manifest file as they are on the disk now.
    func manifestBytes(of installed: InstalledVersion) throws(SyncError) -> [UInt8] {
        do { return try FileSystem.read(installed.manifestPath) } catch { throw SyncError(.io, error.message) }
    }

    /// Writes `bytes` over `installed`'s manifest file, atomically and fsynced: a source's
    /// verified copy of that version, once the file on the disk changed (`manifestDamage`).
    public func writeManifest(_ bytes: [UInt8], of installed: InstalledVersion) throws(SyncError) {
        do { try FileSystem.writeAtomically(bytes, to: installed.manifestPath) } catch {
            throw SyncError(.io, "cannot be written again: \(error.reason)", cause: error)
        }
    }

    /// The manifest inside a signed file that was verified when it was installed (keys may have
    /// rotated since, so the signature is not checked again).
    static func parseInstalledManifest(_ bytes: [UInt8]) -> Manifest? {
        try? readInstalledManifest(bytes)
    }

    /// `parseInstalledManifest`, or why not: `.unsupportedFormat` for one a newer build wrote.
    static func readInstalledManifest(_ bytes: [UInt8]) throws(CoreError) -> Manifest {
        guard case .object(let envelope)? = try? CanonicalJSON.parse(bytes), let json = envelope["manifest"] else {
            throw CoreError(.manifestMalformed, "not a signed manifest file")
        }
        return try Manifest(json: json)
    }

    /// Whether `error` (`readVersion`'s) says the manifest cannot be read now rather than what
    /// the version is: a read that failed for a reason outside its bytes (EIO from a failing
    /// card, EACCES after a copy under another user, no memory or file descriptor left). Such
    /// a version is kept with its link (`recover`); a missing manifest, or one that reads and
    /// does not parse, is a verdict.
    static func cannotReadNow(_ error: SyncError) -> Bool {
        guard let code = (error.cause as? StoreError)?.errno else { return false }
        return ![ENOENT, ENOTDIR, EISDIR, ELOOP, ENAMETOOLONG].contains(code)
    }

    /// Why the version `current` names cannot be read now (`cannotReadNow`): it is kept with
    /// its links, and `previous` serves meanwhile if it opens. Nil when `current` reads, or
    /// does not for another reason.
    public func currentCannotBeReadNow() -> SyncError? {
        guard let target = linkTarget(currentLink) else { return nil }
        do { _ = try readVersion(target) } catch where Self.cannotReadNow(error) { return error } catch {}
        return nil
    }

    /// Why the version `current` names does not read when a newer cairnd installed it (a
    /// downgrade): such a version is kept with its links, and `previous` serves meanwhile
    /// (`recover`). Nil when `current` reads, or does not for another reason.
    public func currentWrittenByNewerCairnd() -> SyncError? {
        guard let target = linkTarget(currentLink) else { return nil }
        do { _ = try readVersion(target) } catch where error.code == .unsupportedFormat { return error } catch {}
        return nil
    }
}
