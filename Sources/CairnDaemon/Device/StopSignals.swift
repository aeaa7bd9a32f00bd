import CairnSync
public import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// SIGTERM and SIGINT, as the service group's graceful shutdown also gets them, told to
/// `Stopping`: work on threads of its own that no task cancellation reaches (an export) ends at
/// its next step rather than holding the shutdown until the service manager kills cairnd.
///
/// Work no flag reaches either (an install's inflate, check and canaries: seconds to minutes at
/// a million chunks) would still hold the stop past the unit's `TimeoutStopSec`, and SIGKILL would
/// end it: `deadline` seconds after the first signal the process says so in one line and exits
/// 0 at once. Every instant of an install is safe to stop at (the fault tests SIGKILL it at random
/// ones); the next start removes what it left and installs again.
public enum StopSignals {
    /// Watches both signals until the returned sources are cancelled.
    public static func watch(deadline: Double) -> [any DispatchSourceSignal] {
        let armed = Atomic<Bool>(false)
        return [SIGTERM, SIGINT].map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                Stopping.request()
                guard !armed.exchange(true, ordering: .relaxed) else { return }
                let seconds = deadline == deadline.rounded() && deadline < 1e15 ? "\(Int(deadline))" : "\(deadline)"
                DispatchQueue.global().asyncAfter(deadline: .now() + deadline) {
                    let line = "cairnd: the stop took more than \(seconds) s (stop_timeout): exiting now; an install in progress is done again at the next start\n"
                    _ = line.withCString { write(2, $0, strlen($0)) }
                    _exit(0)
                }
            }
            source.resume()
            return source
        }
    }
}
