public import Foundation
import CairnThreads
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// systemd's notify protocol (sd_notify(3)): datagrams such as `READY=1`, `STATUS=…`,
/// `WATCHDOG=1` sent to the AF_UNIX socket named by `NOTIFY_SOCKET` (a path, or `@name` for the
/// abstract namespace). Without `NOTIFY_SOCKET` every call does nothing, so cairnd runs the same
/// under `Type=notify`, `Type=simple` or no systemd at all. Errors are ignored, as sd_notify's are
/// by most daemons: a missing manager must never stop queries. Sends never wait: a manager whose
/// queue is full (an AF_UNIX datagram queue holds `net.unix.max_dgram_qlen` messages, 10 by
/// default) loses that notice instead of stalling the thread that sent it, which may be one of
/// the two threads that answer queries.
public struct SystemdNotifier: Sendable {
    /// The socket address, nil when not started by a service manager that asked for notices.
    public let socketPath: String?
    /// How often the watchdog is fed: a quarter of `WATCHDOG_USEC`, so that a check that fails
    /// once or a notice lost leaves room for two more before systemd gives up; nil when the
    /// watchdog is off for this process (`WATCHDOG_PID` set and not ours).
    public let watchdogInterval: Duration?

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let path = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        socketPath = path
        if path != nil, let usec = environment["WATCHDOG_USEC"].flatMap(Int64.init), usec > 0,
           environment["WATCHDOG_PID"].flatMap(Int32.init).map({ $0 == getpid() }) ?? true {
            watchdogInterval = .microseconds(max(1, usec / 4))
        } else {
            watchdogInterval = nil
        }
    }

    /// Sends `fields` (`KEY=value` lines) as one datagram. Newlines inside a value are replaced.
    public func notify(_ fields: [String]) {
        guard let socketPath else { return }
        let text = fields.map { $0.replacingOccurrences(of: "\n", with: " ") }.joined(separator: "\n")
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(socketPath.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }  // abstract namespace
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { return }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (bytes.first == 0 ? 0 : 1))
        _ = text.withCString { pointer in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, pointer, strlen(pointer), Int32(MSG_NOSIGNAL | MSG_DONTWAIT), $0, length)
                }
            }
        }
    }

    /// `STATUS=<line>`: what `systemctl status` shows.
    public func status(_ line: String) { notify(["STATUS=" + line]) }
}

/// What cairnd checks before each `WATCHDOG=1`, so that systemd restarts a cairnd that no longer
/// answers, not only one whose timer stopped: every event loop of the socket server runs a task
/// handed to it within the check's time (a loop that turns takes connections and answers; a
/// connection of its own would not do: with every `max_connections` slot held by busy clients it
/// would wait in the queue, and a healthy cairnd would be restarted), and the search threads
/// are not stuck (searches pending at two checks in a row and none finished between them). A
/// sync is not judged, however long: a multi-gigabyte download is no hang.
struct LivenessProbe: Sendable {
    /// The socket server's event loops (Hummingbird's default group).
    let loops: any EventLoopGroup
    let searchLoad: @Sendable () -> BoundedThreadPool.Load

    /// Nil when alive, else why not, in a few words; and the search load read, for the next check.
    func check(timeout nanoseconds: Int, previous: BoundedThreadPool.Load?) -> (problem: String?, load: BoundedThreadPool.Load) {
        let deadline = DispatchTime.now() + .nanoseconds(nanoseconds)
        var problem: String?
        for (index, loop) in loops.makeIterator().enumerated() {
            let ran = DispatchSemaphore(value: 0)
            loop.execute { ran.signal() }
            if ran.wait(timeout: deadline) == .timedOut {
                problem = "event loop \(index) of the socket server ran nothing within \(nanoseconds / 1_000_000) ms"
                break
            }
        }
        let load = searchLoad()
        if problem == nil, let previous, BoundedThreadPool.Load.stalled(from: previous, to: load) {
            problem = "the search threads finished none of \(load.pending) searches since the last check"
        }
        return (problem, load)
    }
}

/// Feeds systemd's watchdog (`WatchdogSec=` in the unit) while cairnd answers: every
/// `watchdogInterval` (at least 10 ms), `WATCHDOG=1` once `LivenessProbe` finds it alive; a
/// check that fails is logged instead (the first of a run at error, the rest at debug), and
/// systemd restarts cairnd when none succeeds for `WatchdogSec`. Runs on a thread of its own:
/// the check blocks, and must not wait for the cooperative threads it judges. On shutdown the
/// service ends at once; the thread ends after its check.
struct WatchdogService: Service {
    let notifier: SystemdNotifier
    /// Between checks, in nanoseconds (also each check's time).
    let interval: Int
    let probe: LivenessProbe
    let logger: Logger

    /// The service when `WATCHDOG_USEC` asks for it, else none.
    static func ifEnabled(_ notifier: SystemdNotifier, probe: LivenessProbe, logger: Logger) -> [any Service] {
        guard let interval = notifier.watchdogInterval else { return [] }
        let nanoseconds = Int(interval.components.seconds) * 1_000_000_000 + Int(interval.components.attoseconds / 1_000_000_000)
        return [WatchdogService(notifier: notifier, interval: max(nanoseconds, 10_000_000), probe: probe, logger: logger)]
    }

    func run() async throws {
        let stop = DispatchSemaphore(value: 0)
        // Resumed once: by the thread when it ends, or by a stop, whichever comes first. A stop
        // before the thread starts leaves `stop` signalled: the thread then ends at once.
        let ended = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let end: @Sendable () -> Void = { ended.withLock { $0.take() }?.resume() }
        let halt: @Sendable () -> Void = {
            stop.signal()
            end()
        }
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
                    ended.withLock { $0 = finished }
                    Thread { [self] in
                        feed(until: stop)
                        end()
                    }.start()
                }
            } onGracefulShutdown: { halt() }
        } onCancel: { halt() }
    }

    /// Checks and feeds every `interval` until `stop` is signalled. The first check waits one
    /// interval: the socket binds as the services start, beside this one.
    private func feed(until stop: DispatchSemaphore) {
        var previous: BoundedThreadPool.Load?
        var failing = false
        while stop.wait(timeout: .now() + .nanoseconds(interval)) == .timedOut {
            let (problem, load) = probe.check(timeout: interval, previous: previous)
            previous = load
            if let problem {
                logger.log(level: failing ? .debug : .error,
                           "not feeding systemd's watchdog: \(problem); systemd restarts cairnd if no check succeeds within WatchdogSec")
                failing = true
            } else {
                if failing { logger.notice("cairnd answers again; feeding systemd's watchdog") }
                failing = false
                notifier.notify(["WATCHDOG=1"])
            }
        }
    }
}
