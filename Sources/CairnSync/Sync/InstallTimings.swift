import Logging

/// Where one install's time went, from the manifest request to the daemon serving the new
/// version; logged as one `install timings` line (what `scripts/bench sync` quotes).
struct InstallTimings {
    var path = "full"
    /// The manifest request and its checks.
    var manifest = Duration.zero
    /// Downloading and hashing blobs; for a full snapshot downloaded from its first byte, also
    /// inflating it, as it arrives (`SnapshotStream`).
    var fetch = Duration.zero
    /// Inflating a snapshot whose download resumed, or applying the delta (to a copy of the
    /// installed index, or in place to the previous version's file) and deriving the new rows.
    var build = Duration.zero
    /// The pass over every row that checks the state root and loads the rows for searching.
    var verify = Duration.zero
    var canaries = Duration.zero
    /// fsync, rename into place, the links.
    var swap = Duration.zero
    /// Writing `state.json`.
    var state = Duration.zero
    /// The query path opening the new version (`onInstalled`).
    var open = Duration.zero
    /// A delta's part of `build`: its check, the wait for the rows read ahead, the SQLite
    /// apply, the rows files (logged as `delta_check_ms`, `delta_readahead_ms`,
    /// `delta_apply_ms`, `delta_rows_ms`), and what the check computed (`delta_checked_by`).
    var delta: IndexBuilder.DeltaPhases?

    var metadata: Logger.Metadata {
        let total = manifest + fetch + build + verify + canaries + swap + state + open
        var metadata: Logger.Metadata = [
            "cairn.sync.path": "\(path)", "cairn.sync.manifest_ms": "\(manifest.milliseconds)",
            "cairn.sync.fetch_ms": "\(fetch.milliseconds)", "cairn.sync.build_ms": "\(build.milliseconds)",
            "cairn.sync.verify_ms": "\(verify.milliseconds)", "cairn.sync.canaries_ms": "\(canaries.milliseconds)",
            "cairn.sync.swap_ms": "\(swap.milliseconds)", "cairn.sync.state_ms": "\(state.milliseconds)",
            "cairn.sync.open_ms": "\(open.milliseconds)", "cairn.sync.total_ms": "\(total.milliseconds)",
        ]
        if let delta {
            metadata["cairn.sync.delta_check_ms"] = "\(delta.check.milliseconds)"
            metadata["cairn.sync.delta_readahead_ms"] = "\(delta.readAhead.milliseconds)"
            metadata["cairn.sync.delta_apply_ms"] = "\(delta.apply.milliseconds)"
            metadata["cairn.sync.delta_rows_ms"] = "\(delta.rows.milliseconds)"
            metadata["cairn.sync.delta_checked_by"] = "\(delta.checkedBy.rawValue)"
        }
        return metadata
    }
}
