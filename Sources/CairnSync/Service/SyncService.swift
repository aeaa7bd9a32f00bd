public import Logging
public import ServiceLifecycle

/// The poll loop as a `Service`: sync at start, then after each poll interval (±10 % jitter), or
/// sooner after failures (exponential back-off), or at once when `requestSync()` is called. The
/// executable calls `requestSync()` on SIGHUP and from the socket's "sync now". Waits use the
/// injected clock; graceful shutdown cancels the loop (an interrupted download resumes later).
public final class SyncService: Service, Sendable {
    public let syncer: Syncer
    private let configuration: SyncConfiguration
    private let clock: any Clock<Duration>
    private let logger: Logger
    private let trigger = SyncTrigger()

    public init(syncer: Syncer, configuration: SyncConfiguration, clock: any Clock<Duration> = ContinuousClock(),
                logger: Logger) {
        self.syncer = syncer
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
    }

    /// Asks for an attempt now (coalesced with other requests; never blocks).
    public func requestSync() {
        trigger.fire()
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await self.loop()
        }
    }

    private func loop() async {
        var schedule = PollSchedule(interval: configuration.pollInterval, backoffMinimum: configuration.backoffMinimum,
                                    backoffMaximum: configuration.backoffMaximum)
        var random = SystemRandomNumberGenerator()
        while !Task.isCancelled {
            let outcome = await syncer.syncOnce()
            let succeeded = if case .failed = outcome { false } else { true }
            let delay = schedule.next(succeeded: succeeded, using: &random)
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
