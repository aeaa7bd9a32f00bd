import CairnSync
public import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// SIGTERM and SIGINT, as the service group's graceful shutdown also gets them, told to
/// `Stopping`: work on threads of its own that no task cancellation reaches (an export) ends at
/// its next step rather than holding the shutdown until the service manager kills cairnd.
public enum StopSignals {
    /// Watches both signals until the returned sources are cancelled.
    public static func watch() -> [any DispatchSourceSignal] {
        [SIGTERM, SIGINT].map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { Stopping.request() }
            source.resume()
            return source
        }
    }
}
