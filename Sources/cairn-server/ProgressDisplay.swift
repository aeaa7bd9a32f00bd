import CairnPublish
import Foundation
import Synchronization

/// Embedding progress on standard error: a bar redrawn in place on a terminal, otherwise a
/// plain line at the start, every 10 seconds and at the end.
final class ProgressDisplay: Sendable {
    private struct State {
        var start = Date()
        var lastLine = Date.distantPast
    }

    private let isTerminal = isatty(STDERR_FILENO) == 1
    private let state = Mutex(State())

    func update(_ progress: PublishProgress) {
        let line: String? = state.withLock { state in
            let now = Date()
            if progress.done == 0 { state.start = now }
            let elapsed = now.timeIntervalSince(state.start)
            let rate = elapsed > 0 ? Double(progress.done) / elapsed : 0
            let eta = rate > 0 ? Int(Double(progress.total - progress.done) / rate) : 0
            let finished = progress.done == progress.total
            if progress.total == 0 { return "nothing to embed: every chunk's vector is reused\n" }
            if isTerminal {
                let width = 30, filled = width * progress.done / max(progress.total, 1)
                let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
                return "\rembedding [\(bar)] \(progress.done)/\(progress.total) chunks  "
                    + String(format: "%.1f/s  ETA %d:%02d", rate, eta / 60, eta % 60) + (finished ? "\n" : "")
            }
            guard progress.done == 0 || finished || now.timeIntervalSince(state.lastLine) >= 10 else { return nil }
            state.lastLine = now
            return "embedded \(progress.done)/\(progress.total) chunks " + String(format: "(%.1f/s, ETA %d s)\n", rate, eta)
        }
        if let line { FileHandle.standardError.write(Data(line.utf8)) }
    }
}
