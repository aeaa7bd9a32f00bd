public import Foundation
import Synchronization

/// Where the attempt in progress is (the `sync.progress` object of `GET /v1/status`,
/// protocol/socket-api.md), and which attempts have started and ended since cairnd started, so
/// that a caller who asked for a sync can wait for an attempt that began after its request.
///
/// The syncer moves it through the phases; the downloader counts body bytes as they are
/// written; status reads it from any thread.
public final class SyncProgress: Sendable {
    public enum Phase: String, Sendable {
        /// Fetching the manifest (and walking the root chain), verifying and deciding.
        case checking
        /// Receiving the blobs the install needs (model files, the delta or the snapshot).
        case downloading
        /// Applying or inflating, checking the state root and canaries, swapping.
        case installing
    }

    /// What holds the syncer other than an attempt (an attempt asked for meanwhile waits for it).
    public enum Operation: String, Sendable {
        case export, rollback
    }

    /// One reading of the attempt in progress.
    public struct Report: Sendable, Equatable {
        /// The attempt's number: attempts count from 1 at each start of the process.
        public var attempt: Int
        public var phase: Phase
        /// The version being installed, once the manifest is verified and an install decided.
        public var version: Int?
        /// Bytes received by this attempt, and the bytes it expects to receive (nil until known).
        public var bytesDone: Int64
        public var bytesTotal: Int64?
        /// Bytes per second since the first byte of the downloading phase; nil before one second.
        public var bytesPerSecond: Double?
        /// Seconds left at that rate; nil when the rate is not known.
        public var etaSeconds: Double?
        /// When the attempt started.
        public var started: Date
        /// The source being asked now (its URL as configured); nil before the first.
        public var source: String?
        /// What the attempt waits for, when it waits on something other than a source (another
        /// channel's download of the same model); nil otherwise.
        public var waiting: String?
    }

    /// Everything status shows: the attempt in progress (nil between attempts), how many have
    /// started and ended, and the last one's outcome label (`installed`, `up_to_date` or the
    /// error code).
    public struct Reading: Sendable, Equatable {
        public var current: Report?
        public var started: Int
        public var finished: Int
        public var lastOutcome: String?
        /// The export or rollback running now (nil: none), and since when.
        public var operation: Operation?
        public var operationStarted: Date?
        /// When a requested attempt that waits for the request allowance starts; nil when none waits.
        public var requestHeldUntil: Date?
    }

    private struct State {
        var started = 0
        var finished = 0
        var lastOutcome: String?
        var phase = Phase.checking
        var version: Int?
        var done: Int64 = 0
        var total: Int64?
        var startedAt = Date()
        /// When the downloading phase began, on the monotonic clock.
        var downloadStart: ContinuousClock.Instant?
        var source: String?
        var waiting: String?
        var operation: (Operation, Date)?
        var requestHeldUntil: Date?
        /// Run as each attempt starts, under the lock `request` holds (`onBegin`).
        var beginHook: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    public init() {}

    /// Runs `fire` (which asks for an attempt) and returns the number of the first attempt that
    /// starts after it: the next one, whether or not an attempt runs now.
    public func request(_ fire: () -> Void) -> Int {
        state.withLock { state in
            fire()
            return state.started + 1
        }
    }

    /// Runs `hook` as each attempt starts, atomically with the count `request` answers from:
    /// a request either gets this attempt's number and is spent by `hook`, or the next one's.
    func onBegin(_ hook: @escaping @Sendable () -> Void) {
        state.withLock { state in state.beginHook = hook }
    }

    /// An attempt starts: phase `checking`, nothing received.
    func begin(at date: Date) {
        state.withLock { state in
            state.beginHook?()
            state.started += 1
            state.phase = .checking
            (state.version, state.done, state.total, state.startedAt, state.downloadStart, state.source) = (nil, 0, nil, date, nil, nil)
            state.waiting = nil
        }
    }

    /// The attempt turns to `source` (the next in order): what status names while it is asked,
    /// so that a slow or failing mirror shows as the one holding the attempt.
    func asking(_ source: String) {
        state.withLock { state in state.source = source }
    }

    /// The attempt waits for `what` (nil: no longer), which status names. A download's rate
    /// counts from the end of a wait that came before its first byte.
    func waiting(for what: String?) {
        state.withLock { state in
            state.waiting = what
            if what == nil, state.done == 0, state.downloadStart != nil { state.downloadStart = .now }
        }
    }

    /// The install of `version` starts downloading `bytes` (what is not already staged).
    func downloading(version: Int, expecting bytes: Int64) {
        state.withLock { state in
            state.phase = .downloading
            state.version = version
            state.total = (state.total ?? 0) + max(0, bytes)
            if state.downloadStart == nil { state.downloadStart = .now }
        }
    }

    /// More bytes to receive than announced (a retry from zero, the snapshot after a delta failed).
    func expect(_ bytes: Int64) {
        state.withLock { state in state.total = (state.total ?? 0) + max(0, bytes) }
    }

    /// Body bytes written to a staging file.
    func received(_ bytes: Int64) {
        state.withLock { state in state.done += bytes }
    }

    /// Everything is downloaded; the new index is being built, checked and swapped in.
    func installing() {
        state.withLock { state in state.phase = .installing }
    }

    /// A requested attempt waits for the request allowance until `date` (nil: no longer).
    func holdingRequests(until date: Date?) {
        state.withLock { state in state.requestHeldUntil = date }
    }

    /// An export or rollback starts (`operation` since `date`), or ends (nil).
    func operating(_ operation: Operation?, at date: Date) {
        state.withLock { state in state.operation = operation.map { ($0, date) } }
    }

    /// The attempt ended with `outcome` (its metrics label).
    func finish(outcome: String) {
        state.withLock { state in
            state.finished += 1
            state.lastOutcome = outcome
        }
    }

    public func reading() -> Reading {
        state.withLock { state in
            var current: Report?
            if state.started > state.finished {
                let total = state.total.map { max($0, state.done) }
                var rate: Double?
                if let start = state.downloadStart {
                    let elapsed = (ContinuousClock.now - start) / .seconds(1)
                    if elapsed >= 1 { rate = Double(state.done) / elapsed }
                }
                let eta: Double? = if let rate, rate > 0, let total, state.phase == .downloading {
                    Double(total - state.done) / rate
                } else { nil }
                current = Report(attempt: state.started, phase: state.phase, version: state.version, bytesDone: state.done,
                                 bytesTotal: total, bytesPerSecond: rate, etaSeconds: eta, started: state.startedAt,
                                 source: state.source, waiting: state.waiting)
            }
            return Reading(current: current, started: state.started, finished: state.finished, lastOutcome: state.lastOutcome,
                           operation: state.operation?.0, operationStarted: state.operation?.1,
                           requestHeldUntil: state.requestHeldUntil)
        }
    }
}
