public import Foundation
import ServiceLifecycle
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
    /// Half of `WATCHDOG_USEC` when the watchdog is on for this process (`WATCHDOG_PID` unset or ours).
    public let watchdogInterval: Duration?

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let path = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        socketPath = path
        if path != nil, let usec = environment["WATCHDOG_USEC"].flatMap(Int64.init), usec > 0,
           environment["WATCHDOG_PID"].flatMap(Int32.init).map({ $0 == getpid() }) ?? true {
            watchdogInterval = .microseconds(usec / 2)
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

    /// Sends `WATCHDOG=1` every `watchdogInterval` until the task is cancelled; returns at once
    /// when the watchdog is off.
    public func keepWatchdogFed() async {
        guard let interval = watchdogInterval else { return }
        while !Task.isCancelled {
            notify(["WATCHDOG=1"])
            try? await Task.sleep(for: interval)
        }
    }
}

/// Feeds systemd's watchdog (`WatchdogSec=` in the unit) while cairnd runs.
struct WatchdogService: Service {
    let notifier: SystemdNotifier

    /// The service when `WATCHDOG_USEC` asks for it, else none.
    static func ifEnabled(_ notifier: SystemdNotifier) -> [any Service] {
        notifier.watchdogInterval == nil ? [] : [WatchdogService(notifier: notifier)]
    }

    func run() async throws {
        await cancelWhenGracefulShutdown { await notifier.keepWatchdogFed() }
    }
}
