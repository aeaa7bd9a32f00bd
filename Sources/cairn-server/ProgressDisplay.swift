import CairnPublish
import CairnCommandLine
import Foundation
import Synchronization

/// Publishing progress on standard error — chunks read and given their vectors, and of them
/// embedded by the model: a line redrawn in place on a terminal (with a bar and an ETA when the
/// total is known, as with `--vectors`), otherwise a plain line every 10 seconds and at the end
/// (a source refused early prints only its one line of error).
final class ProgressDisplay: Sendable {
    private struct State {
        // Monotonic: a clock stepped while publishing must not give a negative rate.
        var start = ContinuousClock.now
        var lastLine = ContinuousClock.now
        /// A line is drawn on the terminal and not ended: an error must start a line of its own.
        var open = false
    }

    private let isTerminal = isatty(STDERR_FILENO) == 1
    private let state = Mutex(State())

    func update(_ progress: PublishProgress) {
        let line: String? = state.withLock { state in
            let now = ContinuousClock.now
            let elapsed = (now - state.start) / .seconds(1)
            let rate = elapsed > 0 ? Double(progress.done) / elapsed : 0
            let counts = "\(progress.done)\(progress.total.map { "/\($0)" } ?? "") chunks, \(progress.embedded) embedded"
                + String(format: ", %.1f/s", rate)
            var eta = ""
            if let total = progress.total, rate > 0 {
                let seconds = Int(Double(max(0, total - progress.done)) / rate)
                eta = String(format: ", ETA %d:%02d", seconds / 60, seconds % 60)
            }
            if isTerminal {
                var bar = ""
                if let total = progress.total {
                    // A source that grew while read can count past the total: the bar stays full.
                    let width = 30, filled = min(width, width * progress.done / max(total, 1))
                    bar = "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "] "
                }
                state.open = !progress.finished
                return "\rreading \(bar)\(counts)\(eta)  " + (progress.finished ? "\n" : "")
            }
            guard progress.finished || now - state.lastLine >= .seconds(10) else { return nil }
            state.lastLine = now
            return "read \(counts)\(eta)\n"
        }
        if let line { writeStandardError(line) }
    }

    /// Ends a line left open on the terminal, so that what follows (an error) has one of its own.
    func endLine() {
        let open = state.withLock { state in
            defer { state.open = false }
            return state.open
        }
        if open { writeStandardError("\n") }
    }
}
