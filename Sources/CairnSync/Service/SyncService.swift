import CairnCore
public import Logging
public import ServiceLifecycle

/// The poll loop as a `Service`: sync at start, then after each poll interval (±10 % jitter), or
/// sooner after failures (exponential back-off), or at once when `requestSync()` is called or
/// an attempt installed a version before asking every source. The
/// executable calls `requestSync()` on SIGHUP and from the socket's "sync now". Waits use the
/// injected clock; graceful shutdown cancels the loop (an interrupted download resumes later).
public final class SyncService: Service, Sendable {
    public let syncer: Syncer
    private let configuration: SyncConfiguration
    private let clock: any Clock<Duration>
    private let logger: Logger
    private let trigger = SyncTrigger()
    /// Told one line as each attempt starts and ends (cairnd sends them to systemd as `STATUS=`).
    private let onStatus: @Sendable (String) -> Void
    /// Told each attempt's outcome label (`installed`, `up_to_date` or the error code), how it
    /// installed (`delta`, `full`, nil) and the bytes it received (cairnd's metrics).
    private let onAttempt: @Sendable (_ outcome: String, _ path: String?, _ bytes: Int64) -> Void

    public init(syncer: Syncer, configuration: SyncConfiguration, clock: any Clock<Duration> = ContinuousClock(),
                logger: Logger, onStatus: @escaping @Sendable (String) -> Void = { _ in },
                onAttempt: @escaping @Sendable (_ outcome: String, _ path: String?, _ bytes: Int64) -> Void = { _, _, _ in }) {
        self.syncer = syncer
        self.configuration = configuration
        self.clock = clock
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
        while !Task.isCancelled {
            onStatus("syncing from \(configuration.sources.count) source(s)")
            let outcome = await syncer.syncOnce()
            onStatus(Self.statusLine(outcome, serving: Serving(syncer.servedVersion)))
            onAttempt(outcome.label, await syncer.lastInstallPath, await syncer.lastAttemptStats.totalBytes)
            let succeeded = if case .failed = outcome { false } else { true }
            var delay = schedule.next(succeeded: succeeded, using: &random)
            // Installed from a source before others were asked: one of them may be newer still.
            if case .installed = outcome, await syncer.installedBeforeAskingAll {
                logger.info("installed before every source was asked; asking the others now")
                delay = .zero
            }
            logger.debug("next sync", metadata: ["cairn.sync.delay_seconds": "\(delay.components.seconds)"])
            await waitForTrigger(orDelay: delay)
        }
    }

    /// Returns after `delay` on the clock, on `requestSync()`, or on cancellation.
    private func waitForTrigger(orDelay delay: Duration) async {
        let clock = self.clock
        let trigger = self.trigger
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await clock.sleep(for: delay) }
            group.addTask { await trigger.wait() }
            await group.next()
            group.cancelAll()
        }
    }
}
