// cairn-bench install-phases --index FILE [--repeat 3]
//
// What the file-bound phases of an install cost on one snapshot file, each the best of
// `--repeat` runs (the file stays in the page cache, as it is right after an install writes it):
// the row scan with each check (`Snapshot.scan`: none = opening to serve or after a delta,
// recomputed = after a full snapshot), the structure checks a device no longer runs on a signed
// snapshot (`Snapshot.verifyStructure`), and copying the file in the kernel, then fsyncing it.
import CairnIndex
import CairnStore
import Foundation

func installPhases(_ arguments: [String]) throws {
    let path = try requiredOption("--index", in: arguments)
    let repeats = try intOption("--repeat", in: arguments, default: 3)
    let clock = ContinuousClock()
    func best(_ body: () throws -> Void) rethrows -> Double {
        var best = Double.infinity
        for _ in 0..<repeats {
            let start = clock.now
            try body()
            best = min(best, milliseconds(clock.now - start))
        }
        return best
    }
    let root = try Snapshot.meta(at: path).stateRoot
    var result: [String: Any] = [:]
    result["scan_none_ms"] = try best { _ = try Snapshot.scan(at: path, check: .none) }
    result["scan_recomputed_ms"] = try best { _ = try Snapshot.scan(at: path, check: .recomputedHashes, expectedStateRoot: root) }
    let copy = path + ".phases-copy"
    defer { unlink(copy) }
    result["structure_ms"] = try best {
        unlink(copy)
        try FileSystem.copyFile(from: path, to: copy)
        try Snapshot.verifyStructure(at: copy)
    }
    var fsyncMS = Double.infinity
    result["copy_ms"] = try best {
        unlink(copy)
        try FileSystem.copyFile(from: path, to: copy)
        let start = clock.now
        let fd = open(copy, O_RDONLY)
        fsync(fd)
        close(fd)
        fsyncMS = min(fsyncMS, milliseconds(clock.now - start))
    }
    result["fsync_after_copy_ms"] = fsyncMS
    try printJSON(result)
}
