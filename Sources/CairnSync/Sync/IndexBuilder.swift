import CairnCore
import CairnEmbedding
import CairnIndex
import CairnStore
import CairnThreads
import Foundation
import Synchronization

/// Builds and checks a new version's index in its `.partial` folder: synchronous, file-bound work.
enum IndexBuilder {
    /// What a snapshot that cannot be inflated into the index file is refused as.
    static func snapshotFailure(_ error: StoreError) -> SyncError {
        let code: SyncError.Code = error.code == .diskFull ? .diskFull : .installFailed
        return SyncError(code, "the snapshot cannot be installed: \(error.message)", cause: error)
    }

    /// An index file that a delta can bring up to date in place instead of copying the live
    /// one: the installed version's spare copy, or the `previous` version's file with the delta
    /// blob that took it to the installed version (kept in the installed version's folder).
    struct ReusableFile: Sendable {
        let path: String
        /// How the file comes up to the installed version first; nil for a spare, already there.
        let catchUp: CatchUp?
        /// Makes the file the installer's own (drops the `previous` link) before it moves it.
        let release: @Sendable () throws(SyncError) -> Void

        struct CatchUp: Sendable {
            /// The version the file holds.
            let version: InstalledVersion
            /// `versions/<installed>/delta.blob`: the delta from `version` to the installed
            /// version, and its entry in the installed version's manifest.
            let blob: String
            let ref: Manifest.DeltaRef
        }
    }

    /// What `applyDelta` built.
    struct DeltaResult: Sendable {
        /// The new index's rows files (the installed version's base beside a new overlay),
        /// derived from the installed version's rows without reading the file's; nil when the
        /// installed rows were not at hand (then the transaction checked the state root over the
        /// stored hashes) or no longer fit an overlay: the caller then scans the file.
        let contents: IndexContents?
        /// Whether the file is the previous version's, brought up to date in place.
        let reused: Bool
        /// Where the time went (`InstallTimings`).
        var phases = DeltaPhases()
    }

    /// A delta install's phases, for the `install timings` line.
    struct DeltaPhases: Sendable {
        /// Decoding the delta (and the kept one) and checking it against the installed rows.
        var check = Duration.zero
        /// Waiting, once the check is done, for the rows read ahead (zero when the file was
        /// cached and nothing was read, or when the live index is copied instead).
        var readAhead = Duration.zero
        /// Moving or copying the file, and the SQLite transaction that applies the edits.
        var apply = Duration.zero
        /// Writing the new rows files from the installed ones.
        var rows = Duration.zero
        /// What the delta was checked by.
        var checkedBy = Check.transaction
    }

    /// How a delta was checked to give the new version (protocol/snapshot.md, "Verification
    /// after a delta").
    enum Check: String, Sendable {
        /// Its set hash, derived from the installed rows' (a delta of format 2): no pass over them.
        case setHash = "set_hash"
        /// The state root over the installed rows' leaves, merged with the delta's.
        case stateRoot = "state_root"
        /// The state root over the file's stored hashes, inside the transaction (the installed
        /// rows were not at hand).
        case transaction
    }

    /// Starts what bringing `reusable` up in place needs before the new delta is at hand, on
    /// threads of their own: the kept delta that brings a previous version's file to the
    /// installed version (none for a spare, which is a copy of it already), decoded, and the
    /// rows it touches read eight at a time, since the file may be gigabytes that the page cache
    /// no longer holds. Its ids are on disk before the new delta is downloaded, so on a real link
    /// its reads are done behind the download. Nil when there is no file to reuse (or it is
    /// open: the live index is copied instead). Whoever starts it waits for it (`wait`) before
    /// the file moves or the `.partial` folder is removed; `applyDelta` does.
    static func prepare(_ reusable: ReusableFile?, installed: InstalledVersion, scratch: String) -> Preparation? {
        guard let file = reusable, !Database.isOpenImmutable(file.path) else { return nil }
        return Preparation(file: file, catchingUp: BackgroundWork.Pending { () -> Preparation.CatchUp? in
            guard let kept = file.catchUp else { return Preparation.CatchUp(edit: nil, readAhead: nil) }
            guard let decoded = catchUpDelta(kept, installed: installed, scratch: scratch) else { return nil }
            let edit = SnapshotWriter.Edit(decoded)
            return Preparation.CatchUp(edit: edit, readAhead: BackgroundWork.Pending { SnapshotWriter.prefetch([edit], in: file.path) })
        })
    }

    /// A reusable file on its way to the installed version (`prepare`).
    struct Preparation: Sendable {
        let file: ReusableFile
        /// The kept delta's edit and the reading ahead of its rows (neither for a spare); nil
        /// when the kept delta is torn or does not chain exactly (then the live index is copied).
        let catchingUp: BackgroundWork.Pending<CatchUp?>

        struct CatchUp: Sendable {
            let edit: SnapshotWriter.Edit?
            let readAhead: BackgroundWork.Pending<Void>?
        }

        /// Blocks until its threads are done and the read-ahead's connections closed.
        func wait() { catchingUp.wait()?.readAhead?.wait() }
    }

    /// Builds `output` from the verified delta blob: checks the delta against the installed
    /// version's rows when `installedRows` are given (the state root the result will have,
    /// before any file is touched), then applies it in place to the file `prepared`: the
    /// installed version's spare copy, or the previous version's file brought up to the
    /// installed version by its kept delta (written only where changed); else to a copy of the
    /// installed index. Waits for `prepared`'s threads before it returns or throws.
    static func applyDelta(blob: String, ref: Manifest.DeltaRef, manifest: Manifest, installed: InstalledVersion,
                           installedRows: IndexContents?, prepared: Preparation?, to output: String) throws(SyncError) -> DeltaResult {
        // The threads are done, and the read-ahead's connections closed, before the file moves
        // and is written, also on a refusal.
        defer { prepared?.wait() }
        let clock = ContinuousClock()
        let start = clock.now
        var phases = DeltaPhases()
        // The previous version's file is reused only when the delta can be checked beforehand
        // (against the installed rows): a refusal then never costs it. A spare (a copy of the
        // installed index) is used even for a delta checked only inside its transaction: a
        // refusal then costs the spare, as it would a copy.
        let checkable = installedRows.map { $0.meta.version == installed.version && $0.meta.stateRoot == installed.stateRoot } ?? false
        let delta = try decodeDelta(blob, ref: ref, scratch: output + ".delta")
        guard delta.fromVersion == installed.version, delta.toVersion == manifest.version,
              delta.fromStateRoot == installed.stateRoot, delta.toStateRoot == manifest.stateRoot else {
            throw SyncError(.installFailed, "the delta's versions or state roots differ from its manifest entry")
        }
        let edit = SnapshotWriter.Edit(delta)
        // The new delta's rows are read ahead too, on threads of their own, while this one checks
        // it (at a million rows mostly the state root's pass over 32 MB of leaves, 20-25 ms).
        // (Reading them while the transaction runs instead was slower: the readers then take
        // the cores from it.)
        let readingAhead = prepared.map { prepared in BackgroundWork.Pending { SnapshotWriter.prefetch([edit], in: prepared.file.path) } }
        defer { readingAhead?.wait() }
        // Checked against the installed rows when they are at hand: nil otherwise.
        var checked: IndexContents.CheckedDelta?
        if let base = installedRows, checkable {
            let result: IndexContents.CheckedDelta
            do { result = try base.changed(deleting: edit.deletes, upserting: edit.upserts, bySetHash: delta.toSetHash != nil) } catch {
                throw SyncError(.installFailed, "the delta does not apply: \(error.message)", cause: error)
            }
            phases.checkedBy = result.stateRoot == nil ? .setHash : .stateRoot
            guard result.gives(stateRoot: manifest.stateRoot, setHash: delta.toSetHash, count: manifest.chunkCount) else {
                let what = phases.checkedBy == .setHash ? "set hash" : "state root"
                throw SyncError(.stateRootMismatch, "the delta does not produce the new version's \(what); nothing was changed")
            }
            checked = result
        }
        // In place when the kept delta (if any) decoded and this one was checked beforehand.
        var reuse: InPlace?
        if let prepared, let catchUp = prepared.catchingUp.wait(), catchUp.edit == nil || checkable {
            reuse = InPlace(file: prepared.file, edits: (catchUp.edit.map { [$0] } ?? []) + [edit])
        }

        let waiting = clock.now
        phases.check = waiting - start
        prepared?.wait()
        readingAhead?.wait()
        let applying = clock.now
        phases.readAhead = applying - waiting
        if let reuse {
            try reuse.file.release()
            guard rename(reuse.file.path, output) == 0 else {
                throw SyncError(.io, "cannot move \(reuse.file.path) beside the new index: \(String(cString: strerror(errno)))")
            }
            // The move is made durable before a page changes: else a power cut could leave the
            // file, half brought up to date, where it was (a spare that the next delta would take
            // for a copy of the live index, or the previous version's index).
            do { try FileSystem.syncDirectory((reuse.file.path as NSString).deletingLastPathComponent) } catch {
                throw SyncError(.io, "cannot make the move of \(reuse.file.path) durable: \(error.message)", cause: error)
            }
        } else {
            do {
                try FileSystem.copyFile(from: installed.indexPath, to: output)
            } catch where error.code == .diskFull {
                throw SyncError(.diskFull, "the disk filled while copying the installed index to apply the delta")
            } catch {
                throw SyncError(.io, "cannot copy the installed index beside it: \(error.message)")
            }
        }
        let edits = reuse?.edits ?? [edit]
        let reused = reuse != nil
        let meta = SnapshotMeta(channel: manifest.channel, version: manifest.version, stateRoot: manifest.stateRoot,
                                dimension: manifest.dimension, modelID: manifest.model.id, chunkCount: manifest.chunkCount)
        do {
            // No journal: on any refusal the caller removes the file (and falls back to the full
            // snapshot, or removes the `.partial` folder). The pages SQLite writes out part-way
            // (its page cache holds 2 MB) start for the disk every 512 rows, rather than waiting
            // for `finish`'s fsync.
            let writeback = WritebackStarter(path: output)
            try SnapshotWriter.apply(edits, newMeta: meta, to: output, check: checked == nil ? .storedHashes : .checkedByCaller,
                                     ifRefused: .discarded, onRows: writeback.start)
            // The changed pages go to disk while the rows files are written, so `finish`'s fsync
            // finds them written (on a thread of its own: submitting them blocks for milliseconds).
            BackgroundWork.start { FileSystem.startWriteback(path: output) }
            let deriving = clock.now
            phases.apply = deriving - applying
            let contents = try checked?.contents(ofFile: output, meta: meta, setHash: delta.toSetHash, basePath: IndexContents.basePath(beside: installed.indexPath))
            phases.rows = clock.now - deriving
            return DeltaResult(contents: contents, reused: reused, phases: phases)
        } catch {
            if error.code == .diskFull {
                throw SyncError(.diskFull, "the disk filled while applying the delta: \(error.message)", cause: error)
            }
            if error.cannotOpenNow { throw cannotOpenNow(error) }
            throw SyncError(error.code == .stateRootMismatch ? .stateRootMismatch : .installFailed,
                            "the delta does not apply: \(error.message)", cause: error)
        }
    }

    /// A file brought up to date in place, and the edits that take it to the new version (the
    /// kept delta's first, unless it is a spare).
    private struct InPlace {
        let file: ReusableFile
        let edits: [SnapshotWriter.Edit]
    }

    /// The kept delta that brings a reusable file up to the installed version, when it is whole
    /// and chains exactly; else nil (copy instead).
    private static func catchUpDelta(_ kept: ReusableFile.CatchUp, installed: InstalledVersion, scratch: String) -> EncodedDelta? {
        guard let delta = try? decodeDelta(kept.blob, ref: kept.ref, scratch: scratch),
              delta.fromVersion == kept.version.version, delta.fromStateRoot == kept.version.stateRoot,
              delta.toVersion == installed.version, delta.toStateRoot == installed.stateRoot else { return nil }
        return delta
    }

    /// The delta blob of manifest entry `ref`, checked against its SHA-256 (a kept blob was
    /// written without an fsync: a crash may have torn it), inflated to exactly its uncompressed
    /// size into the scratch file `scratch` and read in place from its mapping (`EncodedDelta`):
    /// only its ids are held in memory, however many rows it rewrites. The file is unlinked as
    /// soon as it is mapped; its blocks are freed with the mapping.
    private static func decodeDelta(_ blob: String, ref: Manifest.DeltaRef, scratch: String) throws(SyncError) -> EncodedDelta {
        let mapping: FileSystem.Mapping
        do {
            try Zlib.decompressFile(blob, sha256: ref.sha256, to: scratch, size: ref.uncompressedSize)
            mapping = try FileSystem.Mapping(unlinking: scratch)
        } catch {
            throw SyncError(error.code == .diskFull ? .diskFull : error.code == .hashMismatch ? .hashMismatch : .installFailed,
                            "the delta cannot be decoded: \(error.message)", cause: error)
        }
        do { return try EncodedDelta(mapping) } catch {
            throw SyncError(.installFailed, "the delta cannot be decoded: \(error.message)", cause: error)
        }
    }

    /// The checks a new index passes before it is served, in one pass over its rows that also
    /// writes its rows files for the query path (protocol/snapshot.md), and the meta naming this
    /// version and the signed state root. A full snapshot (`byDelta` false) has every row's
    /// hashes recomputed from its data and the state root over them compared with the signed one.
    /// A delta's result was checked by `applyDelta` (the state root over the stored hashes, the
    /// upserted rows' computed from the delta as they were written) inside the transaction that
    /// committed it, so each row's leaf comes from its stored hashes.
    ///
    /// A full snapshot's pass runs as two halves on two install threads. The files are not
    /// fsynced yet (`finish` does that, once, before the swap).
    static func check(index: String, manifest: Manifest, byDelta: Bool, readingDirect: Bool) async throws(SyncError) -> IndexContents {
        let scan: Snapshot.RowScan
        do {
            // Loading alone is light: one thread, leaving the other core to queries.
            scan = try Snapshot.RowScan(at: index, check: byDelta ? .storedHashes : .recomputedHashes, parts: byDelta ? 1 : 2,
                                        readingDirect: readingDirect)
        } catch {
            throw failure(error)
        }
        @Sendable func part(_ part: Int) async -> Result<Snapshot.RowScan.Part, IndexError> {
            await BackgroundWork.run { () -> Result<Snapshot.RowScan.Part, IndexError> in
                Result { () throws(IndexError) in try scan.part(part) }
            }
        }
        // Part 0 on one install thread while this task waits for part 1 on the other.
        async let first = part(0)
        let rest = scan.parts > 1 ? [await part(1)] : []
        let contents: IndexContents
        do throws(IndexError) {
            // Handed over, not kept here: `finish` lets each part go once joined.
            let parts = try ([await first] + rest).map { (result) throws(IndexError) in try result.get() }
            contents = try scan.finish(consume parts, expectedStateRoot: manifest.stateRoot, durable: false)
        } catch {
            throw failure(error)
        }
        try check(contents.meta, against: manifest)
        return contents
    }

    /// Everything `Snapshot.verify` checks (SQLite and FTS integrity, every hash, the state root
    /// against the signed manifest's), and the meta naming this version: an installed version
    /// before `cairn rollback` serves it again.
    static func verify(index: String, manifest: Manifest) throws(SyncError) {
        let meta: SnapshotMeta
        do { meta = try Snapshot.verify(at: index, expectedStateRoot: manifest.stateRoot) } catch { throw failure(error) }
        try check(meta, against: manifest)
    }

    private static func failure(_ error: IndexError) -> SyncError {
        if error.cannotOpenNow { return cannotOpenNow(error) }
        return SyncError(error.code == .stateRootMismatch ? .stateRootMismatch : error.code == .diskFull ? .diskFull : .installFailed,
                  "the new index fails verification: \(error.message)", cause: error)
    }

    /// The new version's rows cannot be opened now (`IndexError.cannotOpenNow`): the device's
    /// limits, not the version's bytes, so no source is blamed, a delta does not fall back to the
    /// snapshot, and the next attempt builds it again (`Syncer.cannotOpenRowsNow`).
    private static func cannotOpenNow(_ error: IndexError) -> SyncError {
        SyncError(.io, "the new version's rows cannot be opened now (\(error.message)); it is built again at the next attempt", cause: error)
    }

    private static func check(_ meta: SnapshotMeta, against manifest: Manifest) throws(SyncError) {
        guard meta.version == manifest.version, meta.channel == manifest.channel, meta.dimension == manifest.dimension,
              meta.stateRoot == manifest.stateRoot, meta.chunkCount == manifest.chunkCount else {
            throw SyncError(.installFailed, "the new index's meta names another version, channel, dimension, state root or size than its manifest")
        }
    }

    /// Runs the manifest's canaries on the new index; every one must find all its expected ids.
    ///
    /// With a model, each query is embedded and run in its canary's mode. Without one (the
    /// manifest names no weights) the queries run with no vector, so every mode answers
    /// lexically — exactly what the device will serve. `k` above `SearchRequest.kRange` is
    /// checked against the top 100, which is stricter. Messages give the canary's position,
    /// never its query.
    static func runCanaries(_ canaries: [Canary], index path: String, contents: IndexContents, modelDirectory: String?,
                            maximumTokens: Int, ranking: RankingConfiguration) throws(SyncError) {
        guard !canaries.isEmpty else { return }
        let index: SearchIndex
        do { index = try SearchIndex(path: path, configuration: ranking, contents: contents) } catch {
            throw SyncError(.installFailed, "the new index cannot be opened: \(error.message)", cause: error)
        }
        var embedder: SentenceEmbedder?
        if let modelDirectory {
            do { embedder = try SentenceEmbedder(directory: modelDirectory, maximumTokens: maximumTokens) } catch {
                throw SyncError(.modelIncompatible, "the version's model cannot be loaded: \(error)")
            }
            guard embedder?.dimension == index.meta.dimension else {
                throw SyncError(.modelIncompatible, "the model's dimension differs from the index's \(index.meta.dimension)")
            }
        }
        for (position, canary) in canaries.enumerated() {
            let request = SearchIndex.request(for: canary)
            let vector = request.mode == .lexical ? nil : embedder?.embed(canary.query)
            guard index.passes(canary, queryVector: vector) else {
                throw SyncError(.canaryFailed, "canary \(position + 1) of \(canaries.count) did not find its expected chunks in the top \(request.k); version refused")
            }
        }
    }
}

/// Starts a file's writeback (`FileSystem.startWriteback`) on an install thread, at most one at a
/// time: submitting the pages blocks for milliseconds, which the writer need not wait for, and a
/// call while one runs is dropped (the next finds those pages).
final class WritebackStarter: Sendable {
    private let path: String
    private let running = Atomic<Bool>(false)

    init(path: String) { self.path = path }

    func start() {
        guard running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        BackgroundWork.start { [self] in
            FileSystem.startWriteback(path: path)
            running.store(false, ordering: .releasing)
        }
    }
}
