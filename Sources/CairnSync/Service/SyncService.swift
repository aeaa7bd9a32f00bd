import CairnCore
import Foundation
public import Logging
public import ServiceLifecycle

/// The poll loop as a `Service`: sync at start, then after each poll interval (±10 % jitter), or
/// sooner after failures (exponential back-off), or when `requestSync()` is called (at once,
/// within the request allowance: `SyncConfiguration.requestInterval`), or at once when an
/// attempt installed a version before asking every source. The executable calls
/// `requestSync()` on SIGHUP and from the socket's "sync now". Graceful shutdown cancels the
/// loop (an interrupted download resumes later).
public final class SyncService: Service, Sendable {
    public let syncer: Syncer
    private let configuration: SyncConfiguration
    private let logger: Logger
    private let trigger = SyncTrigger()
    /// Told one line as each attempt starts and ends (cairnd sends them to systemd as `STATUS=`).
    private let onStatus: @Sendable (String) -> Void
    /// Told each attempt's outcome label (`installed`, `up_to_date` or the error code), how it
    /// installed (`delta`, `full`, nil) and the bytes it received (cairnd's metrics).
    private let onAttempt: @Sendable (_ outcome: String, _ path: String?, _ bytes: Int64) -> Void

    public init(syncer: Syncer, configuration: SyncConfiguration, logger: Logger, onStatus: @escaping @Sendable (String) -> Void = { _ in },
                onAttempt: @escaping @Sendable (_ outcome: String, _ path: String?, _ bytes: Int64) -> Void = { _, _, _ in }) {
        self.syncer = syncer
        self.configuration = configuration
        self.logger = logger
        self.onStatus = onStatus
        self.onAttempt = onAttempt
    }

    /// What answers queries, as the status line tells it.
    enum Serving {
        /// The daemon does not say (a syncer without a served-version reader).
        case untold
        case none
        case version(Int)

        init(_ read: (@Sendable () -> Int?)?) {
            guard let read else { self = .untold; return }
            self = read().map(Serving.version) ?? .none
        }

        var told: String {
            switch self {
            case .untold: "answering from what is installed"
            case .none: "not answering queries"
            case .version(let number): "answering from version \(number)"
            }
        }
    }

    /// The status line after `outcome`.
    static func statusLine(_ outcome: SyncOutcome, serving: Serving) -> String {
        switch outcome {
        case .installed(let version): "installed version \(version.version); answering queries"
        case .upToDate(let version): version.map { "version \($0) is the newest; answering queries" } ?? "nothing published yet"
        case .failed(let error):
            // systemd shows this line to every local user (`systemctl status`).
            "sync failed (\(error.code): \(SourceURL.redactingPasswords(in: error.message))); \(serving.told)"
        }
    }

    /// Asks for an attempt now (coalesced with other requests; never blocks). Returns the number
    /// of the attempt that answers it: the first to start after the request
    /// (`SyncProgress.Reading.finished` reaches it when that attempt has ended).
    @discardableResult
    public func requestSync() -> Int {
        syncer.progress.request { trigger.fire() }
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await self.loop()
        }
        // What the last attempts kept in memory (routine changes) is written as cairnd stops.
        await syncer.flushState()
    }

    private func loop() async {
        var schedule = PollSchedule(interval: configuration.pollInterval, backoffMinimum: configuration.backoffMinimum,
                                    backoffMaximum: configuration.backoffMaximum)
        var random = SystemRandomNumberGenerator()
        var allowance = RequestAllowance(interval: configuration.requestInterval, burst: SyncConfiguration.requestBurst)
        var heldSaid: ContinuousClock.Instant?
        // The first attempt to start after a request answers it (`requestSync()`'s number): as
        // an attempt starts, the requests before it are spent, so none of them asks for another.
        syncer.progress.onBegin { [trigger] in trigger.spend() }
        while !Task.isCancelled {
            onStatus("syncing from \(configuration.sources.count) source(s)")
            let outcome = await syncer.syncOnce()
            onStatus(Self.statusLine(outcome, serving: Serving(syncer.servedVersion)))
            onAttempt(outcome.label, await syncer.lastInstallPath, await syncer.lastAttemptStats.totalBytes)
            let succeeded = if case .failed = outcome { false } else { true }
            var delay = schedule.next(succeeded: succeeded, advanced: await syncer.lastAttemptAdvanced > 0, using: &random)
            // Installed from a source before others were asked: one of them may be newer still.
            if case .installed = outcome, await syncer.installedBeforeAskingAll {
                logger.info("installed before every source was asked; asking the others now")
                delay = .zero
            }
            logger.debug("next sync", metadata: ["cairn.sync.delay_seconds": "\(delay.components.seconds)"])
            // Not a request: no wait, and nothing of the allowance taken (a request made
            // meanwhile is answered by this attempt).
            if delay == .zero { continue }
            let pollDue = ContinuousClock.now + delay
            if await waitForTrigger(orDelay: delay) { await holdRequested(&allowance, pollDue: pollDue, said: &heldSaid) }
        }
    }

    /// A requested attempt starts once the request allowance has it, or at `pollDue` when the
    /// schedule's poll comes first (which takes nothing of it): until then the wait shows in
    /// status (`request_held_until`), and further requests join this one. Said at notice once
    /// an hour, at debug otherwise: a caller in a loop would fill the log.
    private func holdRequested(_ allowance: inout RequestAllowance, pollDue: ContinuousClock.Instant,
                               said: inout ContinuousClock.Instant?) async {
        while !Task.isCancelled, let wait = allowance.take(at: .now) {
            let now = ContinuousClock.now
            let pollFirst = pollDue <= now + wait
            let pause = pollFirst ? max(.zero, pollDue - now) : wait
            // Whole seconds, rounded up, as status's times are: never earlier than it starts.
            let until = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + pause / .seconds(1)).rounded(.up))
            syncer.progress.holdingRequests(until: until)
            let interval = configuration.requestInterval / .seconds(1)
            let line: Logger.Message = "requested syncs come faster than \(SyncConfiguration.requestBurst) at once, then one per \(interval.rounded() == interval ? String(Int(interval)) : String(interval)) s (sync_request_interval); the next starts at \(SyncState.time(until))"
            if said.map({ now - $0 >= .seconds(3600) }) ?? true {
                logger.notice(line)
                said = now
            } else {
                logger.debug(line)
            }
            do { try await Task.sleep(for: pause) } catch { break }
            if pollFirst { break }
        }
        syncer.progress.holdingRequests(until: nil)
    }

    /// Returns after `delay` (false), on `requestSync()` (true), or on cancellation (false).
    private func waitForTrigger(orDelay delay: Duration) async -> Bool {
        let trigger = self.trigger
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask { try? await Task.sleep(for: delay); return false }
            group.addTask { await trigger.wait(); return !Task.isCancelled }
            let requested = await group.next() ?? false
            group.cancelAll()
            return requested
        }
    }
}
