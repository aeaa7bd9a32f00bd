import ArgumentParser
import CairnClient
import CairnCore
import Foundation

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show the installed version, the model, sync state and disk use.")

    @OptionGroup var connection: ConnectionOptions
    @ParentCommand var root: CairnCommand
    @Flag(help: "Print the daemon's JSON answer.")
    var json = false

    func run() async throws {
        let daemon = DaemonConnection(root: root.connection, local: connection, json: json)
        let body = try daemon.call("GET", "/v1/status")
        if json { return try daemon.printJSON(body) }
        print(Self.render(try daemon.decode(DaemonStatus.self, from: body)))
    }

    /// `stamp` with how long ago it was: what a device offline for months answers from.
    static func dated(_ stamp: String, now: Date) -> String {
        guard let age = Timestamp(rfc3339: stamp)?.age(at: now) else { return stamp }
        let hours = Int(max(0, age) / 3600)
        return stamp + (hours < 48 ? " (\(hours) hour\(hours == 1 ? "" : "s") ago)" : " (\(hours / 24) days ago)")
    }

    static func render(_ status: DaemonStatus) -> String {
        var lines: [String] = []
        if let version = status.version, let root = status.stateRoot {
            lines.append("version     \(version) (channel \(status.channel ?? "?"), state root \(root))")
            if let published = status.sync.published { lines.append("published   " + Self.dated(published, now: Date())) }
            lines.append("chunks      \(status.chunkCount ?? 0)" + (status.denseSearch == "narrowed"
                ? " (dense search narrowed by sign bits, then rescored exactly)" : ""))
            if let rows = status.rows {
                let changed = rows.overlayRows + rows.removedRows > 0
                    ? " (\(rows.overlayRows) rows changed by deltas beside the base, \(rows.removedRows) base rows removed)" : ""
                lines.append("rows        " + (rows.source == "scanned" ? "read from the index at open (no rows files were there)"
                                                                         : "mapped from the rows files") + changed)
            }
            lines.append("model       " + (status.modelLoaded ? "\(status.modelID ?? "?") (\(status.dimension ?? 0) dimensions)"
                                                              : "none: answers are lexical only"))
        } else if let reason = status.notServing {
            lines.append("version     none answering: \(reason)")
        } else if !status.syncAvailable {
            lines.append("version     none installed, and this cairnd has no source to sync from")
        } else {
            lines.append("version     none installed yet (waiting for the first sync)")
        }
        let sync = status.sync
        lines.append("online      " + (sync.online.map { $0 ? "yes" : "no" } ?? "unknown"))
        lines.append("stale       " + (sync.stale.map { $0 ? "YES" : "no" } ?? "unknown"))
        if sync.expired == true {
            lines.append("expired     YES: the installed manifest expired at \(sync.expires ?? "?"); no newer version has been installed")
        }
        if let trust = sync.trust {
            let keys = "\(trust.signingThreshold) of \(trust.signingKeys.count) signing key(s)"
            lines.append("trust       " + (trust.mode == "root"
                ? "root \(trust.rootVersion ?? 0) (\(keys), root expires \(trust.rootExpires ?? "?")\(trust.rootExpired == true ? ": EXPIRED" : ""))"
                : "pinned keys (\(keys))"))
            if let from = trust.recoveringFrom {
                lines.append("recovering  version \(from) was signed only by revoked keys; the publisher's next version installs")
            }
        }
        if let operation = sync.operation {
            lines.append("busy        \(operation.kind == "export" ? "exporting" : "rolling back") since \(operation.started) (a sync waits for it)")
        }
        if let progress = sync.progress {
            lines.append("syncing     attempt \(progress.attempt) since \(progress.started): " + SyncProgressDisplay.describe(progress)
                         + (progress.waiting == nil ? progress.source.map { " (from \($0))" } ?? "" : ""))
        }
        lines.append("last sync   attempt \(sync.lastAttempt ?? "never"), success \(sync.lastSuccess ?? "never")")
        if let error = sync.lastError { lines.append("last error  \(error)") }
        let budget = sync.maxDiskBytes.map { " (max_disk_bytes \($0))" } ?? ""
        if let previous = sync.previousVersion {
            lines.append("rollback    to version \(previous)" + budget)
        } else if let dropped = sync.previousDropped {
            lines.append("rollback    none: version \(dropped) was removed to make room for an install" + budget)
        }
        switch sync.spare {
        case "ready": lines.append("spare       ready: the next delta applies in place to a spare copy of the index")
        case "copying": lines.append("spare       copying the index in the background, for the next delta to apply in place")
        case "declined":
            lines.append("spare       none: a copy of the index would pass max_disk_bytes or the free disk space" + budget
                         + "; the next delta copies the live index")
        default: break
        }
        if let newer = sync.newerVersion {
            lines.append("newer       version \(newer), installed by a newer cairnd, is kept: upgrade cairnd to serve it")
        }
        if let held = sync.heldBackVersion {
            lines.append("held back   version \(held) (rolled back from; sync installs only newer versions)")
        }
        for source in sync.sources {
            let inARow = source.failuresInARow.map { $0 > 1 ? " (\($0) attempts in a row)" : "" } ?? ""
            let health = source.healthy.map { $0 ? "healthy" : "failing" + inARow } ?? "unknown"
            let proxy = source.proxy.map { $0 == "none" ? " direct (proxy none)" : " via proxy \($0)" } ?? ""
            lines.append("source      \(source.url) \(health)" + proxy + (source.lastError.map { " (\($0))" } ?? ""))
        }
        if let channels = status.channels, channels.count > 1 {
            for channel in channels {
                let state = channel.lastErrorCode.map { "last error \($0)" } ?? (channel.stale == true ? "STALE" : "ok")
                lines.append("channel     \(channel.channel): " + (channel.version.map { "version \($0)" } ?? "nothing installed")
                             + " · \(state)" + (channel.progress.map { " · " + SyncProgressDisplay.describe($0) } ?? ""))
            }
        }
        lines.append("disk        \(ByteCountFormatter.string(fromByteCount: status.dataDirectoryBytes, countStyle: .file)) in \(status.dataDirectory)")
        if !status.syncAvailable { lines.append("sync        none: no source is configured (source in cairnd's configuration, or --source URL)") }
        lines.append("software    cairnd \(status.software ?? "from before 2026-12-06"), cairn \(CairnVersion.date)")
        return lines.joined(separator: "\n")
    }
}
