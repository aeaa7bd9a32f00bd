import CairnCommandLine
import Dispatch
import Glibc

/// Ctrl-C (SIGINT) while a command waits on cairnd for work that goes on without it (a sync
/// attempt, an export): `before` runs (a progress line cleared), then `line` is said, and the
/// command exits 130, as any interrupted command does. Cancel the source once the wait ends.
func exitOnInterrupt(saying line: String, before: @escaping @Sendable () -> Void = {}) -> any DispatchSourceSignal {
    signal(SIGINT, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
    source.setEventHandler {
        // write(2) and _exit: stdio's lock may be held by a progress line blocked on a full
        // pipe or a stopped terminal, and nothing buffered is worth waiting for.
        before()
        writeStandardError(line + "\n")
        _exit(128 + SIGINT)
    }
    source.resume()
    return source
}
