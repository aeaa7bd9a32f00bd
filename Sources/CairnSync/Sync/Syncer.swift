import CairnCore
public import CairnIndex
import CairnThreads
public import Foundation
public import Logging
import Synchronization

/// The result of one sync attempt.
public enum SyncOutcome: Sendable {
    /// A source answered and the installed version is its newest.
    case upToDate(version: Int?)
    /// A new version was installed and `current` points at it.
    case installed(InstalledVersion)
    /// Every source failed or was refused; the installed version keeps serving.
    case failed(SyncError)

    /// `installed`, `up_to_date` or the error code (metrics and status).
    public var label: String {
        switch self {
        case .installed: "installed"
        case .upToDate: "up_to_date"
        case .failed(let error): error.code.name
        }
    }
}

/// Runs sync attempts (one at a time: it is an actor): for each source in order, fetch the
/// manifest, verify it, decide, download, verify, install beside the live version and swap.
/// Every refusal is recorded in the sync state as the last error (`state.json`, or in memory
/// until its next write: `persist`) and logged as one line.
public actor Syncer {
    public nonisolated let configuration: SyncConfiguration
    let directory: DataDirectory
    let downloader: Downloader
    let logger: Logger
    let now: @Sendable () -> Date
    let onInstalled: @Sendable (InstalledVersion, IndexContents?) async throws(SyncError) -> Void
    let onModel: @Sendable (String) -> Void
    /// The version the daemon serves (nil: none), when it tells; see `reopenIfUnserved`.
    let servedVersion: (@Sendable () -> Int?)?
    /// The trust chain when a root is pinned (loaded from `DIR/roots/` at start), shared with status.
    public nonisolated let trust: TrustHolder
    /// The attempt in progress and the attempts started and ended, for status and `sync --wait`.
    public nonisolated let progress = SyncProgress()
    /// What the last attempt put on the wire.
    public internal(set) var lastAttemptStats = TransferStats()
    /// How the last attempt installed (`delta` or `full`), nil when it installed nothing.
    public internal(set) var lastInstallPath: String?
    /// Whether the last attempt installed a version from a source before others it did not ask:
    /// one of those may hold a newer version still (a stick's older one installed first), and
    /// the service asks again at once rather than after the poll interval.
    public internal(set) var installedBeforeAskingAll = false
    /// The bytes the last attempt added to downloads kept to resume when it failed on the link
    /// (0 otherwise): a link that drops every half minute still moves a download forward, and
    /// the service then tries again after the shortest back-off, not a doubled one (hours
    /// between 30 s of transfer would take a snapshot weeks on a slow link).
    public internal(set) var lastAttemptAdvanced: Int64 = 0
    /// The delta (by its SHA-256) whose downloads failed on the link before a new byte, and how
    /// many times in a row (sources alike): at `deltaStallsBeforeFallBack` the snapshot is tried
    /// instead. One delta only: another, or the delta's progress or install, starts it over.
    var deltaStalls: (sha: ContentID, count: Int)?
    static let deltaStallsBeforeFallBack = 3
    /// What the last install by delta was checked by (`set_hash`, `state_root` or
    /// `transaction`; protocol/snapshot.md, "Verification after a delta"), nil after a full one.
    public internal(set) var lastDeltaCheck: String?
    /// Whether a later source could take over from the one being asked: its blob downloads
    /// are then cut for their pace (`TransferLimits.slowSourceBytesPerSecond`), and a delta it
    /// does not hold is asked of the next source before its snapshot is downloaded.
    var handingOver = false
    /// Whether a delta the source being asked does not hold goes to another source first.
    var deltaHandOver = false
    /// The state this syncer last wrote to `state.json`, routine fields blanked
    /// (`SyncState.routineBlanked`), and when (`now()`); nil before its first write and after a
    /// failed one (`persist`).
    var stateWritten: (blanked: SyncState, at: Date)?
    /// Other channels' model folders that could not be linked in this attempt (a file failing
    /// its hash, another file system): not read again until the next attempt.
    var modelLinksRefused: Set<String> = []
    /// When this attempt stops waiting for another channel's fetch of its model
    /// (`ModelFetches.waitLimit` after its first wait); nil before it waits.
    var modelWaitDeadline: ContinuousClock.Instant?
    /// Whether an attempt, rollback or export runs; the actor is reentrant across their awaits.
    private var busy = false
    /// A version downloaded and then refused for what its signed bytes hold (its rows do not
    /// make its state root, or a canary fails): the same manifest would be refused again, so it
    /// is not downloaded again while this process runs (a restart tries once more), but a newer
    /// version, or the same one signed again with other bytes (corrected canaries), is. The
    /// newest `refusalsRemembered`: two sources may each offer one (a lagging mirror's and the
    /// origin's), which a single entry would have each attempt build again in turn.
    var refusedAfterDownload: [(manifest: ContentID, error: SyncError)] = []
    static let refusalsRemembered = 8
    /// The rows of the version `current` names as the install that put it there loaded them
    /// (with their state-root leaves), so that the next delta is checked and its rows derived
    /// without reading the file; nil after a rollback, or a start-up whose caller passed none
    /// (the next install then reads them).
    var installedRows: IndexContents?
    /// The sources that answered with a manifest (or "not modified") this attempt, and the
    /// blobs the verified ones name: once every source has answered, a download none names
    /// cannot be resumed from any of them.
    var answeredSources: Set<String> = []
    var blobsOffered: Set<ContentID> = []
    /// `willReuse`'s answer for a kept delta blob, this attempt (its hash is read once).
    var keptDeltaWhole: (blob: String, whole: Bool)?
    /// Sources and root numbers a web page was taken for (warned once each).
    var webPageRootsSaid: Set<String> = []
    /// The held-back version last said to be waited on or passed over: said again only when it changes.
    var heldBackSaid: (version: Int, passedOver: Bool)?
    /// Blob URLs whose last whole download failed its hash, or was answered 404 (not found):
    /// the next request for one asks any cache between to revalidate (`Cache-Control:
    /// no-cache`), since a CDN or proxy keeps a damaged copy of an immutable blob for a year
    /// otherwise, and some keep a 404 for minutes or hours. Forgotten once one verifies.
    var damagedURLs: Set<String> = []
    /// Sources whose last manifest was refused as a rollback (older than what the device holds),
    /// with that manifest's hash and whether a request has since asked caches to revalidate: a
    /// cache or CDN edge that is behind, most likely, which a proxy honouring `no-cache` checks
    /// with the origin when asked, instead of serving the old manifest until its time to live
    /// ends. Asked once per stale manifest: the same one again after that is the source's own
    /// (a mirror that is behind, a replay), which no header changes. Forgotten when the source
    /// serves a manifest that is not older.
    var behindSources: [String: (manifest: ContentID, asked: Bool)] = [:]

    /// Whether a source's `count`-th failure in a row of one kind is logged at info (the first,
    /// the second, then the 4th, 8th, 16th…); the others at debug. A source failing the same way
    /// at every poll for months while another answers (a stick that is not plugged in) said a
    /// line an attempt, 288 a day at the default poll; an attempt that is refused is said each
    /// time (the back-off spaces those out).
    static func saysRepeat(_ count: Int) -> Bool { count <= 2 || count & (count - 1) == 0 }
    /// When `installedRows` came from the rows files at start-up rather than from an install in
    /// this process: whether the installed file still holds those rows (its stored hashes hash to
    /// their state root), checked on an install thread from start-up on. A delta waits for it; if
    /// the file was changed behind cairnd's back, the delta is checked inside its transaction over
    /// the file's stored hashes instead, which refuses it, and the full snapshot is installed
    /// (protocol/threat-model.md, "Out of scope").
    var installedFileCheck: BackgroundWork.Pending<Bool>?
    /// The versions whose damaged manifest a source's copy could not mend, said once at warning.
    var mendRefusalsSaid: Set<Int> = []
    /// The most bytes in which a source's manifest may differ from a damaged installed one to
    /// be written over it: a few flipped bits, or a short run a bad write left.
    static let mendableBytes = 32
    /// The copy of the installed index to its spare, while it runs (`keepSpare`); an attempt
    /// that is to install, a rollback or an export stops it first.
    var spareCopy: SpareCopy?
    /// Called on the spare copy's thread before it copies (tests hold a copy in flight with it:
    /// a test index is copied before anything could be asked of it).
    var beforeSpareCopy: (@Sendable (SpareCopy.Flag) -> Void)?
    func setBeforeSpareCopy(_ body: (@Sendable (SpareCopy.Flag) -> Void)?) { beforeSpareCopy = body }
    /// The installed version whose spare did not fit (`keepSpare` does not try it again); read
    /// by status without waiting for the actor (`spareState`).
    nonisolated let spareDeclined = Mutex<Int?>(nil)
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// Computes the set hash of installed rows that do not know it yet (rows opened at start-up,
    /// or made by a delta checked by its state root before their predecessors knew theirs; a
    /// delta derives the new rows' from the old rows' whenever those know it), on a background
    /// thread: until it is
    /// known, a delta of format 2 is checked by the state root instead (about 0.6 s of one core
    /// at a million rows, against 20-30 ms for each delta's pass over the leaves).
    private static func learnSetHash(of rows: IndexContents?) {
        guard let rows, rows.setHash == nil else { return }
        BackgroundWork.start { rows.computeSetHash() }
    }

    /// - Parameters:
    ///   - now: the wall clock used for expiry and timestamps (injectable for tests).
    ///   - installedRows: the rows files of the version `current` names, as the caller opened
    ///     them for queries; the installed file is checked against them in the background.
    ///   - onInstalled: called after each swap, so the daemon can open the new index; with the
    ///     rows the install's verifying pass loaded from it (nil after a rollback), which
    ///     `SearchIndex(path:configuration:contents:)` takes instead of reading them again. It
    ///     throws when the daemon cannot serve the version (and keeps serving the one before):
    ///     the syncer then points `current` back at that one, and the attempt or the rollback
    ///     fails with the error.
    ///   - onModel: called with the folder of the model an install's version uses, once it is
    ///     in place and before the index is built, so that the daemon may load it meanwhile.
    ///   - servedVersion: the version the daemon serves; when it is not the installed one (which
    ///     could not be opened at start-up for a reason outside its bytes, such as a full disk),
    ///     each attempt first hands the installed version to `onInstalled` again.
    public init(configuration: SyncConfiguration, directory: DataDirectory, logger: Logger,
                now: @escaping @Sendable () -> Date = { Date() }, installedRows: IndexContents? = nil,
                onInstalled: @escaping @Sendable (InstalledVersion, IndexContents?) async throws(SyncError) -> Void = { _, _ in },
                onModel: @escaping @Sendable (String) -> Void = { _ in },
                servedVersion: (@Sendable () -> Int?)? = nil) {
        self.configuration = configuration
        self.directory = directory
        self.downloader = Downloader(limits: configuration.transfer, logger: logger)
        self.logger = logger
        self.now = now
        self.onInstalled = onInstalled
        self.onModel = onModel
        self.servedVersion = servedVersion
        self.installedRows = installedRows
        // Only a delta uses it: a device without sources never reads its rows for nothing (at a
        // million rows, gigabytes through the page cache the queries use).
        if let installedRows, !configuration.sources.isEmpty, let path = directory.installed()?.indexPath {
            let meta = installedRows.meta
            installedFileCheck = BackgroundWork.Pending { Snapshot.storedRowsMatch(at: path, meta: meta) }
        }
        Self.learnSetHash(of: installedRows)
        var chain: TrustChain?
        if let pinned = configuration.trustedRoot {
            do { chain = try directory.trustChain(pinned: pinned) } catch {
                logger.error("the trust chain cannot be loaded; nothing will install: \(error)")
            }
        }
        trust = TrustHolder(chain)
    }

    /// One attempt over the sources in order; the first that installs a version ends it. A
    /// source that has nothing newer (up to date, held back) does not: every source is asked
    /// before the attempt is up to date.
    @discardableResult
    public func syncOnce() async -> SyncOutcome {
        await exclusively { () async -> SyncOutcome in
            progress.begin(at: now())
            directory.forgetUnreadInstalled()
            let held = directory.resumableDownloadBytes()
            let unserved = await self.reopenIfUnserved()
            let outcome = await self.attemptAll(unserved: unserved)
            lastAttemptAdvanced = if case .failed(let error) = outcome, error.isTransport {
                max(0, directory.resumableDownloadBytes() - held)
            } else { 0 }
            // Said before the attempt counts as ended (status), so that what follows it is known.
            if lastAttemptAdvanced > 0 {
                logger.info("the attempt failed on the link but its download advanced; the next comes after the shortest back-off",
                            metadata: ["cairn.sync.bytes_added": "\(lastAttemptAdvanced)"])
            }
            progress.finish(outcome: outcome.label)
            keepSpare()
            return outcome
        }
    }

    /// Opens the installed version again when the daemon does not serve it: it did not open at
    /// start-up or after its install for a reason outside its bytes (a full disk), and was kept.
    /// Returns why it still cannot be opened (nil: it serves now, or nothing was to be opened).
    /// When its own bytes fail this time (damaged since), it goes as a version that cannot be
    /// served does (`fallBack`), and this attempt installs it again (and says that install's
    /// outcome): opened again at every attempt until a restart, it would never serve.
    private func reopenIfUnserved() async -> SyncError? {
        guard let servedVersion, let installed = directory.installed(), servedVersion() != installed.version else { return nil }
        do throws(SyncError) {
            try await onInstalled(installed, nil)
            return nil
        } catch {
            guard error.cause is CannotOpenNow else {
                // A read-only directory keeps its links (`DataDirectory.recover`).
                guard !directory.readOnly else { return error }
                var state = directory.readState()
                await fallBack(from: installed, state: &state)
                // Said by `fallBack`; the attempt installs it again and says how that went.
                // Links that could not change: the version is still the one that fails.
                return directory.installed()?.version == installed.version ? error : nil
            }
            logger.warning("the installed version still cannot be opened; trying again at the next attempt",
                           metadata: ["cairn.sync.version": "\(installed.version)", "cairn.sync.error": "\(error.message)"])
            return error
        }
    }

    /// What a version this attempt installed ends once it serves: a rollback's hold, and a trust
    /// recovery (a version the current root's keys signed answers). Not at its install: one that
    /// cannot be served, or only later, leaves serving the version they were about, and a stale
    /// source could otherwise hand over the held-back version meanwhile. (A kept version that
    /// opens later ends the hold at the next attempt's start, the recovery at its chain walk.)
    /// Returns whether `state` changed.
    private func endHoldAndRecovery(served version: InstalledVersion, state: inout SyncState) -> Bool {
        let changed = state.heldBackVersion != nil || state.recoveringFrom != nil
        if let from = state.recoveringFrom, configuration.trustedRoot != nil {
            logger.notice("recovered: version \(version.version) replaces version \(from), which only revoked keys signed")
        }
        state.liftHold()
        state.endRecovery()
        return changed
    }

    /// The state root the installed version's index holds (its rows', checked at its install),
    /// which stands in for its manifest's once that changed on the disk; nil when it cannot be read.
    private func indexStateRoot(of installed: InstalledVersion) -> ContentID? {
        if let rows = installedRows, rows.meta.version == installed.version { return rows.meta.stateRoot }
        return try? Snapshot.meta(at: installed.indexPath).stateRoot
    }

    /// Writes `bytes` (a source's manifest of the installed version, verified, whose state root
    /// the installed index holds) over that version's manifest file, which changed on the disk
    /// since its install (`damage`): kilobytes, where installing the version again would download
    /// it whole. Only when the two files differ in a few bytes (`mendableBytes`), as a disk's
    /// damage leaves them: a copy signed again (another expiry) or rebuilt may name other blobs
    /// than the folder holds, and is left to the next version. A read-only data directory keeps
    /// the file (start-up said so), as does a write that fails (said; the source is not blamed).
    private func writeManifestAgain(_ bytes: [UInt8], of installed: InstalledVersion, from source: String, damage: String) {
        guard !directory.readOnly, let held = try? directory.manifestBytes(of: installed) else { return }
        guard held.count == bytes.count, zip(held, bytes).lazy.filter({ $0 != $1 }).count <= Self.mendableBytes else {
            logger.log(level: mendRefusalsSaid.insert(installed.version).inserted ? .warning : .debug,
                       "\(installed.manifestPath) changed on the disk since its install (\(damage)); the source's copy of version \(installed.version) is another file (signed again or rebuilt), so it is not written over it: the next version replaces it",
                       metadata: ["cairn.sync.version": "\(installed.version)", "cairn.sync.source": "\(source)"])
            return
        }
        do throws(SyncError) { try directory.writeManifest(bytes, of: installed) } catch {
            logger.error("\(installed.manifestPath) changed on the disk since its install (\(damage)), and \(error.message)",
                         metadata: ["cairn.sync.version": "\(installed.version)"])
            return
        }
        logger.warning("\(installed.manifestPath) changed on the disk since its install (\(damage)); written again from the source's copy of version \(installed.version), whose state root its index holds",
                       metadata: ["cairn.sync.version": "\(installed.version)", "cairn.sync.source": "\(source)"])
    }

    /// The cause of `onInstalled`'s error for a version that cannot be opened now for a reason
    /// outside its bytes (out of memory, a full disk, SQLite busy): the version is kept
    /// installed and opened again at the next attempt, not removed and installed again.
    public struct CannotOpenNow: Error, Sendable {
        public init() {}
    }

    /// How long a source whose blob failed its SHA-256 is tried after the others.
    static let mismatchDemotion: TimeInterval = 24 * 3600

    /// The sources in their configured order, except that one that served a blob failing its
    /// hash (a stale or corrupt mirror), and has not installed a version since, goes last for
    /// `mismatchDemotion`: else each new version cost a whole download from it before the next
    /// source was asked (its answering "up to date" meanwhile does not lift it).
    static func order(_ sources: [String], state: SyncState, now: Date) -> [String] {
        sources.filter { !isDemoted($0, state: state, now: now) } + sources.filter { isDemoted($0, state: state, now: now) }
    }

    /// Whether `url` served a blob failing its hash within `mismatchDemotion` of `now`.
    static func isDemoted(_ url: String, state: SyncState, now: Date) -> Bool {
        guard let failed = state.source(url)?.lastHashMismatch.flatMap({ Timestamp(rfc3339: $0) }) else { return false }
        // A stamp ahead of the clock (written while it ran ahead, since set back) is stale:
        // else the source would go last until the clock caught up, years maybe.
        let age = now.timeIntervalSince1970 - Double(failed.secondsSince1970)
        return age >= 0 && age < mismatchDemotion
    }

    /// - Parameter unserved: why the installed version could not be opened again before the
    ///   attempt; unless a version installs, the attempt fails with it (it is the news: a source
    ///   with nothing newer does not make the device answer).
    private func attemptAll(unserved: SyncError?) async -> SyncOutcome {
        var state = directory.readState()
        // A hold below the version that serves is over: a kept version opened since, or a stop
        // between an install and its handover left it (a hold above it is a rollback's).
        if let held = state.heldBackVersion, unserved == nil, let installed = directory.installed(), installed.version > held,
           servedVersion.map({ $0() == installed.version }) ?? true {
            state.liftHold()
        }
        // Sources no longer configured (removed, or their URL changed) are forgotten: status
        // lists only those configured, and the file would carry them, with any credentials in
        // their URLs, for the device's life.
        state.sources = state.sources?.filter { configuration.sources.contains($0.url) }
        state.lastAttempt = SyncState.time(now())
        state.attempts = (state.attempts ?? 0) + 1
        state.lastAttemptReachedSource = false
        lastAttemptStats = TransferStats()
        lastInstallPath = nil
        installedBeforeAskingAll = false
        keptDeltaWhole = nil
        (modelLinksRefused, modelWaitDeadline) = ([], nil)
        (answeredSources, blobsOffered) = ([], [])
        lastDeltaCheck = nil
        var kept: SyncError?
        if configuration.sources.isEmpty { kept = SyncError(.noSource, "no source is configured") }
        // A source that has nothing newer does not end the attempt: a later one may (a stick
        // left plugged in with the installed version, ahead of the origin that has moved on).
        var upToDate: SyncOutcome?
        /// The first failure that is news: something a source offered that could not be
        /// installed or trusted. Not news: a source out of reach, an older copy (a rollback),
        /// another channel's manifest: each is said in that source's health.
        var news: SyncError?
        // A source cut for its pace while a later one could take its download over, or one
        // without the delta while a later one may hold it, is asked again after the others
        // (once, then neither cut nor handed over): where every source is slow, the download
        // still ends, at the last pace it got, and where none holds the delta, the snapshot
        // comes from the first.
        defer { (handingOver, deltaHandOver) = (false, false) }
        var queue = Self.order(configuration.sources, state: state, now: now())
        var askedAgain: Set<String> = []
        var next = 0
        while next < queue.count {
            let source = queue[next]
            next += 1
            // Only a source not yet cut can take over: a slow one asked again last is no
            // later source, or the last fresh source would be cut for it (and finish at the
            // slow one's pace).
            handingOver = !askedAgain.contains(source) && queue[next...].contains { !askedAgain.contains($0) }
            // A delta is handed to any other source still to be asked, one asked again included:
            // where none holds it, the snapshot then comes from the first (as configured), not
            // from the last fresh one.
            deltaHandOver = !askedAgain.contains(source) && queue[next...].contains { $0 != source }
            progress.asking(source)
            var reached = false
            var timings = InstallTimings()
            do throws(SyncError) {
                let (outcome, contents) = try await attempt(source: source, state: &state, reached: &reached, timings: &timings)
                state.lastAttemptReachedSource = true
                state.lastCheck = SyncState.time(now())
                state.lastError = nil
                state.withSource(source) {
                    $0.lastOK = SyncState.time(now())
                    $0.consecutiveFailures = 0
                    $0.lastError = nil
                    if case .installed = outcome { $0.lastHashMismatch = nil }
                }
                if case .upToDate = outcome {
                    upToDate = upToDate ?? outcome
                    continue
                }
                let succeeded = state.lastSuccess
                state.lastSuccess = SyncState.time(now())
                let clock = ContinuousClock()
                let persisting = clock.now
                await persist(state)
                if case .installed(let version) = outcome {
                    lastInstallPath = timings.path.hasPrefix("delta") ? "delta" : "full"
                    lastDeltaCheck = timings.delta?.checkedBy.rawValue
                    let opening = clock.now
                    do throws(SyncError) { try await onInstalled(version, contents) } catch {
                        state.lastSuccess = succeeded
                        // Installed over the copy of its number that the daemon serves (moved to
                        // `.replaced`), that copy goes back in place instead (`fallBack`).
                        let replacedServes = servedVersion?() == version.version && directory.hasReplacedCopy(of: version.version)
                        if error.cause is CannotOpenNow, !replacedServes {
                            // Its bytes verified; what failed is outside them (memory, a full
                            // disk, SQLite busy). Removed, it would be downloaded and built
                            // again at every back-off while the cause lasts: it stays current,
                            // the version before answers meanwhile, and the next attempt opens
                            // it again (`reopenIfUnserved`).
                            logger.error("installed version cannot be opened now; it is kept and opened again at the next attempt",
                                         metadata: ["cairn.sync.version": "\(version.version)", "cairn.sync.error": "\(error.message)"])
                            // The version before the one served goes (a full disk needs its room).
                            await removeUnreferenced()
                            throw error
                        }
                        await fallBack(from: version, state: &state, replacedServes: replacedServes)
                        throw error
                    }
                    // Once it serves (a version that cannot be served is a failure, backed off
                    // from). Not for a source asked already (handed over, queued again), nor one
                    // demoted for a corrupt blob: it is asked last so as not to be asked for
                    // every version.
                    installedBeforeAskingAll = queue[next...].contains {
                        $0 != source && !askedAgain.contains($0) && !Self.isDemoted($0, state: state, now: now())
                    }
                    if endHoldAndRecovery(served: version, state: &state) { await persist(state) }
                    (timings.state, timings.open) = (opening - persisting, clock.now - opening)
                    logger.info("install timings", metadata: timings.metadata.merging(["cairn.sync.version": "\(version.version)"]) { $1 })
                    await removeUnreferenced()
                }
                return outcome
            } catch {
                let error = Self.withClockHint(error, state: state, now: now())
                // An HTTP error status is an answer: the source was reached.
                if reached || [.httpStatus, .unauthorized, .tls].contains(error.code) { state.lastAttemptReachedSource = true }
                // Handed over (a pace cut, a delta it does not hold) is no failure of the source:
                // a mirror that copies snapshots only would show unhealthy after every version.
                let handedOver = Self.handedOver(error)
                let ownFailure = Self.isDevicesOwn(error)
                let before = state.source(source)
                let sameAgain = before.map { $0.consecutiveFailures > 0 && $0.lastError?.hasPrefix("\(error.code): ") == true } ?? false
                let inARow = sameAgain ? before!.consecutiveFailures + 1 : 1
                logger.log(level: handedOver || Self.saysRepeat(inARow) ? .info : .debug, "sync source refused or failed", metadata: [
                    "cairn.sync.source": "\(source)", "cairn.sync.error": "\(error.code)", "cairn.sync.message": "\(error.message)",
                    "cairn.sync.failures_in_a_row": "\(inARow)",
                ])
                state.withSource(source) {
                    $0.etag = nil
                    // The device's own failure after the source answered: the source is healthy
                    // (else status says "failing" of a source that is not, while a disk is full).
                    if ownFailure, reached, error.code != .cancelled {
                        ($0.lastOK, $0.consecutiveFailures, $0.lastError) = (SyncState.time(now()), 0, nil)
                    }
                    guard !handedOver, !ownFailure else { return }
                    $0.lastFailure = SyncState.time(now())
                    $0.consecutiveFailures += 1
                    $0.lastError = "\(error.code): \(error.message)"
                    if error.isDamagedCopy { $0.lastHashMismatch = SyncState.time(now()) }
                }
                // Keep the most telling error: what a source served beats not reaching one.
                // A cut for pace is no reason to end on: the source is asked again, and what
                // happens then (or at a later source) says more.
                if kept == nil || (kept!.isTransport && !error.isTransport) || Self.handedOver(kept!) { kept = error }
                if news == nil, !error.isTransport, !Self.notNews.contains(error.code) { news = error }
                // A stop ends the attempt; so do rows that cannot be mapped now, which would fail
                // the same way with any source's copy, after its download and build.
                if error.code == .cancelled || Self.cannotOpenRowsNow(error) { break }
                if handedOver, askedAgain.insert(source).inserted { queue.append(source) }
            }
        }
        // Every source answered, and none names a download kept in staging (a version refused
        // for its canaries, one cut off and since superseded): it could not be resumed from any,
        // and would stay until an install is short of room (without max_disk_bytes, until the
        // disk the device shares is nearly full). A source not reached may still hold it.
        if Set(configuration.sources).isSubset(of: answeredSources) {
            let freed = directory.removeDownloads(notIn: blobsOffered)
            if freed > 0 { logger.notice("removed \(freed) bytes of downloads that no source offers any longer") }
        }
        // Up to date at one source, the attempt stays so unless a later one offered something it
        // could not install (a newer version refused, a disk too full): that is said and backed
        // off from. A source out of reach, or an older copy refused as a rollback, is no news.
        if let upToDate, unserved == nil, news == nil {
            await persist(state, routine: true)
            return upToDate
        }
        let error = unserved ?? news ?? kept!
        state.lastError = SyncState.LastError(code: error.code.name, message: error.message, at: SyncState.time(now()))
        await persist(state, routine: true)
        // Every refused attempt is said (the back-off spaces them out to backoff_max), unlike a
        // source's failure within an attempt that ends up to date.
        logger.warning("sync refused: \(error.code): \(error.message)")
        return .failed(error)
    }

    /// A manifest refused for its signatures that names, unverified, a version of `channel` not
    /// above the installed one (or the held-back one): an older copy (a stick written before a
    /// key rotation, left plugged in), which would be refused as a rollback, or held back, even
    /// if it verified. Said as such, so that it is that source's health and not the attempt's
    /// failure (`notNews`); nil for any other refusal. Not while recovering: the installed
    /// version is then no floor.
    static func olderCopy(_ bytes: [UInt8], refused: SyncError, channel: String, installed: InstalledVersion?,
                          heldBack: Int?) -> SyncError? {
        // Not `signature_invalid`: a signature by a trusted key that does not verify is a
        // tampered or damaged file, which is said as such whatever version it names.
        let signatures: [CoreError.Code] = [.keyRevoked, .thresholdNotMet, .untrustedKey]
        guard let installed, let code = (refused.cause as? CoreError)?.code, signatures.contains(code),
              let envelope = try? SignedManifest.decodeEnvelope(bytes), let unverified = try? Manifest(json: envelope.content),
              unverified.channel == channel, unverified.version <= max(installed.version, heldBack ?? 0) else { return nil }
        let floor = unverified.version <= installed.version ? "the installed \(installed.version)" : "the held-back \(heldBack ?? 0)"
        return SyncError(.rollback, "the source holds version \(unverified.version), not newer than \(floor), signed by no key the device trusts now (\(code.name)): an older copy, such as one written before a key rotation; nothing to install",
                         cause: refused)
    }

    /// A TLS failure while this device's clock is more than a day behind the newest time it has
    /// seen (`clock_floor`; a dead clock battery puts it back to 1970): every certificate then
    /// looks not yet valid, which no `ca_bundle` mends. The floor comes from the publisher's
    /// clock, which may run ahead, so the message says to set the clock if it is wrong.
    static func withClockHint(_ error: SyncError, state: SyncState, now: Date) -> SyncError {
        guard error.code == .tls, let floor = state.clockFloor.flatMap(Timestamp.init(rfc3339:)),
              floor > Timestamp(clamping: now.addingTimeInterval(86_400)) else { return error }
        return SyncError(.tls, error.message + "; this device's clock (\(Timestamp(clamping: now).rfc3339)) is behind the newest time it has seen (\(floor.rfc3339)), and a clock that is wrong makes a certificate look not yet valid: if it is, set the clock",
                         cause: error.cause)
    }

    /// Whether `error` is the device's and not the source's: its disk full or its budget passed,
    /// a version it cannot open now, its model damaged on its disk, a stop. The source's health is left as it was (marked
    /// answering when it answered, unless the stop cut the attempt short).
    static func isDevicesOwn(_ error: SyncError) -> Bool {
        [.diskFull, .diskBudget, .cancelled].contains(error.code) || error.cause is CannotOpenNow || error.cause is ModelDamaged
            || cannotOpenRowsNow(error)
    }

    /// Whether an install failed because its new rows file cannot be opened or mapped now (no
    /// memory or address space, too many open files): the device's limits, as a full disk is.
    static func cannotOpenRowsNow(_ error: SyncError) -> Bool {
        (error.cause as? IndexError)?.cannotOpenNow == true
    }

    /// The cause of an install's failure when the model folder it used no longer has its signed
    /// hashes (`removeModelIfDamaged`).
    struct ModelDamaged: Error, Sendable {}

    /// Whether a source's refusal hands its work to another source (a pace cut, a delta it does
    /// not hold): not its failure, and it is asked again after the others.
    static func handedOver(_ error: SyncError) -> Bool {
        error.cause is Downloader.SlowSource || error.cause is Downloader.DeltaElsewhere
    }

    /// Refusals that say a source is behind or serves another channel: with another source up
    /// to date they are that source's health, not the attempt's failure, which would back off
    /// from the good source too. Not the trust refusals (a signature, a threshold, a revoked key,
    /// a root step): a stranger's stick gives them, but so does an origin whose key rotation the
    /// device cannot follow, which must not pass as up to date.
    static let notNews: Set<SyncError.Code> = [.rollback, .cancelled, .channelMismatch]

    /// After `version` was installed but the daemon could not serve it (it serves the version
    /// before): points `current` back at that version, which `previous` names, so that the
    /// links name what is served and no clean-up removes it; the version that failed is removed
    /// as unreferenced, and a later attempt installs it again. Without a previous version (a
    /// first install) nothing is served: `current` is dropped, so that a later attempt installs
    /// it again instead of finding it up to date. With `replacedServes` (just after its install,
    /// which moved a copy of its own number aside to `.replaced`, the one served), that copy goes
    /// back in place instead. Logged; a failure to change the links too.
    private func fallBack(from version: InstalledVersion, state: inout SyncState, replacedServes: Bool = false) async {
        do {
            let back: InstalledVersion?
            if replacedServes, try directory.putBackReplacedCopy(of: version.version) {
                back = directory.installed()
            } else {
                back = try directory.fallBackToPrevious()
                if back == nil { try directory.forgetCurrent() }
            }
            (installedRows, installedFileCheck) = (nil, nil)
            state.setInstalled(back)
            state.forgetManifestETags()
            await persist(state)
            if let back {
                logger.error("installed version cannot be served; current points at the served one again",
                             metadata: ["cairn.sync.version": "\(version.version)", "cairn.sync.serving": "\(back.version)"])
            } else {
                logger.error("installed version cannot be served and none before it can; the next attempt installs it again",
                             metadata: ["cairn.sync.version": "\(version.version)"])
            }
            await removeUnreferenced()
        } catch {
            logger.error("installed version cannot be served, and current cannot be pointed back: \(error.message)",
                         metadata: ["cairn.sync.version": "\(version.version)"])
        }
    }

    /// Runs `body` when no other attempt, rollback or export runs (FIFO), so none of them sees
    /// another's half-done work across an `await`. Each stops the spare copy where it must
    /// (`stopSpare`): a rollback or export first, a sync attempt only once it is to install, so
    /// that an attempt finding nothing new does not cut a copy short (a copy longer than the
    /// polls apart, gigabytes on an SD card, would start over for ever).
    func exclusively<T: Sendable, E: Error>(_ body: () async throws(E) -> T) async throws(E) -> T {
        while busy { await withCheckedContinuation { waiting.append($0) } }
        busy = true
        defer {
            busy = false
            if !waiting.isEmpty { waiting.removeFirst().resume() }
        }
        return try await body()
    }

    /// How long an attempt's routine changes may stay unwritten (`persist`).
    static let routineStateInterval: TimeInterval = 3600

    /// Writes `state.json` (fsyncs and a rename) on an install thread: never on the cooperative
    /// threads that the socket's queries also need. With `routine` (an attempt's end), a state
    /// that differs from the one last written by routine alone (`SyncState.routineBlanked`) is
    /// kept in memory instead, for status, and written with the next change, once
    /// `routineStateInterval` has passed since the last write, or as cairnd stops
    /// (`flushState`): at a five-minute poll, a device up to date wrote the file 288 times a
    /// day, each with two fsyncs, wear that an SD card or eMMC takes for years. A crash loses
    /// at most that interval of times and counts; never a floor, a hold or a version.
    func persist(_ state: SyncState, routine: Bool = false) async {
        let now = self.now()
        // A clock set back since the last write (a negative age) writes, as a change would.
        if routine, let written = stateWritten, case let age = now.timeIntervalSince(written.at),
           age >= 0, age < Self.routineStateInterval, state.routineBlanked == written.blanked {
            directory.keepUnwritten(state)
            return
        }
        let (directory, logger) = (self.directory, self.logger)
        let wrote = await BackgroundWork.run { () -> Bool in
            do {
                try directory.writeState(state)
                return true
            } catch {
                logger.warning("cannot persist sync state: \(error)")
                return false
            }
        }
        stateWritten = wrote ? (state.routineBlanked, now) : nil
    }

    /// Writes the state that attempts kept in memory (`persist`), as cairnd stops.
    public func flushState() async {
        await exclusively {
            guard !directory.readOnly, let state = directory.unwrittenState else { return }
            await persist(state)
        }
    }

    private func attempt(source: String, state: inout SyncState, reached: inout Bool,
                         timings: inout InstallTimings) async throws(SyncError) -> (SyncOutcome, IndexContents?) {
        let base = SourceAccess.base(of: source)
        let clock = ContinuousClock()
        let start = clock.now
        let installed = directory.installed()
        // Checked at each attempt (a manifest is kilobytes): damage since the start counts too.
        let damage = installed.flatMap(directory.manifestDamage)
        let policy = try await signingPolicy(base: base, state: &state, reached: &reached, installed: installed,
                                             installedDamaged: damage != nil)
        // Not sent over a damaged manifest: a 304 would say the installed version is up to date.
        // Nor with a request that revalidates: a cache that passes the device's ETag on could
        // have the origin's 304 and keep its own stale copy.
        let revalidate = behindSources[source]?.asked == false
        let etag = installed == nil || damage != nil || revalidate ? nil : state.source(source)?.etag
        let (fetch, stats) = try await downloader.fetchManifest(
            url: "\(base)/channels/\(configuration.channel)/manifest.json", etag: etag, access: configuration.access(for: base),
            revalidate: revalidate)
        lastAttemptStats.add(stats)
        reached = true
        answeredSources.insert(source)
        guard case .fetched(let bytes, let newETag) = fetch else {
            behindSources[source] = nil
            return (.upToDate(version: installed?.version), nil)
        }
        func behind() {
            let stale = ContentID(hashing: bytes)
            behindSources[source] = (stale, revalidate || behindSources[source].map { $0.manifest == stale && $0.asked } ?? false)
        }

        // Recovery applies only to a device pinned to a root (a key-pinned one has no rotations).
        let recovering = state.recoveringFrom != nil && configuration.trustedRoot != nil
        let manifest: Manifest
        do { manifest = try verifyManifest(bytes, policy: policy) } catch {
            let refusal = recovering ? error : Self.olderCopy(bytes, refused: error, channel: configuration.channel, installed: installed,
                                                              heldBack: state.heldBackVersion) ?? error
            if refusal.code == .rollback { behind() }
            throw refusal
        }
        blobsOffered.formUnion(manifest.blobIDs)
        if manifest.channel == configuration.channel, manifest.version > (state.highestVersionSeen ?? 0) {
            state.highestVersionSeen = manifest.version
        }
        let now = state.effectiveNow(self.now())
        let expired = manifest.isExpired(at: now)
        // The device has now judged this instant to be at least `expires`: a clock set back later
        // must not make it acceptable again.
        if expired { state.raiseClockFloor(to: manifest.expires) }
        let holds = holdCounts(state)
        if let held = state.heldBackVersion, !holds, heldBackSaid.map({ $0 != (held, true) }) ?? true {
            heldBackSaid = (held, true)
            logger.notice("version \(held), held back by a rollback, is passed over: the trusted root holds none of the keys that signed it")
        }
        // An installed version that stopped reading while cairnd runs (changed on the disk)
        // is the floor, as one that could not be served is: else a stick with an older version
        // left plugged in would install it. It holds a rollback's hold only while something
        // serves (one kept unread at start-up may leave nothing: the held-back version then
        // beats answering nothing).
        let unread = installed == nil ? state.installedVersion.map { ($0, state.installedStateRoot.flatMap { ContentID(hex: $0) }) } : nil
        let planner = SyncPlanner(channel: configuration.channel, installed: installed.map {
            // A damaged manifest's state root may be what changed: the index's own stands in.
            .init(version: $0.version, stateRoot: damage == nil ? $0.stateRoot : indexStateRoot(of: $0) ?? $0.stateRoot,
                  dimension: $0.manifest.dimension, modelID: $0.manifest.model.id)
        }, heldBack: holds ? state.heldBackVersion : nil, expiredUpdates: configuration.expiredUpdates, recovering: recovering,
           recoveringSince: state.recoveringSince.flatMap { Timestamp(rfc3339: $0) },
           forgotten: state.forgotten ?? unread, stillServed: unread != nil && (servedVersion.map { $0() != nil } ?? true))
        let decision = planner.decide(manifest, now: now)
        if case .refuse(let error) = decision, error.code == .rollback { behind() } else { behindSources[source] = nil }
        switch decision {
        case .upToDate:
            if let installed, let damage { writeManifestAgain(bytes, of: installed, from: source, damage: damage) }
            if !recovering { state.raiseClockFloor(to: manifest.created) }
            state.withSource(source) { $0.etag = newETag }
            return (.upToDate(version: installed?.version), nil)
        case .heldBack:
            // Said once per version held back, not at every poll while it lasts.
            if heldBackSaid.map({ $0 != (manifest.version, false) }) ?? true {
                heldBackSaid = (manifest.version, false)
                logger.info("newest version is held back by a rollback; waiting for a newer one",
                            metadata: ["cairn.sync.version": "\(manifest.version)"])
            }
            state.withSource(source) { $0.etag = newETag }
            return (.upToDate(version: installed?.version), nil)
        case .refuse(let error):
            throw error
        case .install(let manifest, let path):
            if expired {
                logger.warning("installing expired version \(manifest.version) (expired at \(manifest.expires)): newer than the installed one (expired_updates = install)")
            }
            timings.manifest = clock.now - start
            let manifestID = ContentID(hashing: bytes)
            if let refused = refusedAfterDownload.first(where: { $0.manifest == manifestID }) {
                throw SyncError(refused.error.code, "\(refused.error.message) (refused before; not downloaded again until the publisher changes it or cairnd restarts)")
            }
            // The spare copy reads the live index and writes to staging, which the install is to
            // use: it stops now (and starts again after the attempt, if it is still wanted).
            await stopSpare()
            await hashKeptDelta(path: path, installed: installed)
            // Before room is counted: a model linked needs none.
            await adoptModelFromOtherChannels(manifest, waiting: true)
            try makeRoom(manifest: manifest, path: path, installed: installed, state: &state)
            let version: InstalledVersion, contents: IndexContents
            do throws(SyncError) {
                (version, contents) = try await install(manifest: manifest, bytes: bytes, path: path, base: base,
                                                        installed: installed, state: &state, timings: &timings)
            } catch {
                // The model kept from before may be what fails (its bytes damaged on the disk since
                // their hashes were checked): then it is no refusal of this version.
                if [.canaryFailed, .modelIncompatible].contains(error.code), await removeModelIfDamaged(manifest) {
                    throw SyncError(.io, "the model's files no longer have their signed SHA-256 (damaged on this disk); the model is removed and downloaded again at the next attempt (\(error.message))",
                                    cause: ModelDamaged())
                }
                if [.stateRootMismatch, .canaryFailed].contains(error.code) {
                    refusedAfterDownload = Array(([(manifestID, error)] + refusedAfterDownload).prefix(Self.refusalsRemembered))
                }
                throw error
            }
            (installedRows, installedFileCheck) = (contents, nil)
            Self.learnSetHash(of: contents)
            state.setInstalled(version)
            if expired { state.expiredInstalls = (state.expiredInstalls ?? 0) + 1 }
            // Only what the device installs (or a root it accepts) moves the clock floor: a
            // manifest that is merely verified could be a revoked key's, dated far ahead.
            state.raiseClockFloor(to: manifest.created)
            state.withSource(source) { $0.etag = newETag }
            return (.installed(version), contents)
        }
    }
}
