@testable import CairnSync
import Testing

/// The `install timings` line (`InstallTimings.metadata`), which `scripts/bench scale` and
/// `scripts/bench sync` read: a delta's phases are named in it, a full install's line has none.
@Suite struct InstallTimingsTests {
    @Test func givenADeltaInstall_whenItsTimingsAreLogged_thenTheCheckReadAheadApplyAndRowsPhasesAreNamed() {
        var timings = InstallTimings()
        timings.path = "delta-in-place"
        timings.build = .milliseconds(300)
        timings.delta = IndexBuilder.DeltaPhases(check: .milliseconds(60), readAhead: .milliseconds(70), apply: .milliseconds(160),
                                                 rows: .milliseconds(10))
        let metadata = timings.metadata
        #expect(metadata["cairn.sync.delta_check_ms"] == "60")
        #expect(metadata["cairn.sync.delta_readahead_ms"] == "70")
        #expect(metadata["cairn.sync.delta_apply_ms"] == "160")
        #expect(metadata["cairn.sync.delta_rows_ms"] == "10")
        #expect(metadata["cairn.sync.total_ms"] == "300")
    }

    @Test func givenAFullInstall_whenItsTimingsAreLogged_thenNoDeltaPhaseIsNamed() {
        var timings = InstallTimings()
        timings.fetch = .milliseconds(900)
        let metadata = timings.metadata
        #expect(metadata["cairn.sync.path"] == "full" && metadata["cairn.sync.total_ms"] == "900")
        #expect(metadata.keys.allSatisfy { !$0.hasPrefix("cairn.sync.delta_") })
    }
}
