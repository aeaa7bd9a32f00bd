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
                cleanup.withLock { $0 }?()
                FileHandle.standardError.write(Data("cairn eval: interrupted; cairnd stopped\n".utf8))
                exit(128 + number)
            }
            source.resume()
            sources.append(source)
        }
    }

    /// Sets what an interruption undoes (nil: nothing).
    static func onInterrupt(_ body: (@Sendable () -> Void)?) {
        cleanup.withLock { $0 = body }
    }
}
