import CairnCommandLine
import Foundation
import Synchronization

/// Ends `cairn eval` on SIGINT or SIGTERM as a failure would end it: the cairnd it started is
/// stopped (Foundation starts it in a process group of its own, which a terminal's Ctrl-C does
/// not reach, so it would go on running with a whole index) and the temporary folder is removed
/// unless `--keep`; then exit 128 + the signal (130 for Ctrl-C).
enum EvalInterruption {
    /// What to undo now; replaced as the evaluation goes on.
    private static let cleanup = Mutex<(@Sendable () -> Void)?>(nil)
    /// The signal sources, kept alive for the process's life.
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []

    /// Catches SIGINT and SIGTERM from now on (called once, before anything is started).
    static func install() {
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                interrupted.store(true, ordering: .sequentiallyConsistent)
                cleanup.withLock { $0 }?()
                writeStandardError("cairn eval: interrupted; cairnd stopped\n")
                exit(128 + number)
            }
            source.resume()
            sources.append(source)
        }
    }

    /// Set as an interruption's handler starts: the evaluation then fails too (its cairnd is
    /// being stopped), and must not exit with its own status before the handler's 128 + signal.
    private static let interrupted = Atomic<Bool>(false)

    /// Parks the calling thread for good when an interruption is being handled: the handler
    /// ends the process. Called before the evaluation reports a failure of its own.
    static func yieldToInterruption() {
        guard interrupted.load(ordering: .sequentiallyConsistent) else { return }
        DispatchSemaphore(value: 0).wait()
    }

    /// Sets what an interruption undoes (nil: nothing).
    static func onInterrupt(_ body: (@Sendable () -> Void)?) {
        cleanup.withLock { $0 = body }
    }
}

/// The end of an evaluation's temporary folder: removed, or kept and named (`--keep`), once.
/// An interruption's handler and the evaluation's own clean-up (which goes on until the process
/// exits, and fails as soon as cairnd stops) may both reach it; the second waits for the first
/// to finish instead of removing the same tree beside it (each then stopped at the other's
/// missing files and left the folder).
final class ScratchEnd: Sendable {
    let path: String
    let keep: Bool
    private let done = Mutex(false)

    init(path: String, keep: Bool) {
        self.path = path
        self.keep = keep
    }

    func run() {
        done.withLock { done in
            guard !done else { return }
            done = true
            if keep { progress("kept \(path)") } else { try? FileManager.default.removeItem(atPath: path) }
        }
    }
}
