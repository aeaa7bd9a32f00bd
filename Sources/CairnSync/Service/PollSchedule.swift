/// When to poll next: the poll interval after a good attempt, exponential back-off after
/// failures (min, 2·min, 4·min, … capped at max), each wait jittered by ±10 %. A value type,
/// tested without clocks.
public struct PollSchedule: Sendable {
    public let interval: Duration
    public let backoffMinimum: Duration
    public let backoffMaximum: Duration
    /// Consecutive failed attempts.
    public private(set) var failures = 0

    public init(interval: Duration, backoffMinimum: Duration, backoffMaximum: Duration) {
        self.interval = interval
        self.backoffMinimum = backoffMinimum
        self.backoffMaximum = backoffMaximum
    }

    /// Records an attempt and returns the wait before the next one. A failed attempt that
    /// `advanced` a download kept to resume counts as the first failure: the link works at
    /// times, and each short window moves the download on.
    public mutating func next(succeeded: Bool, advanced: Bool = false, using random: inout some RandomNumberGenerator) -> Duration {
        failures = succeeded ? 0 : advanced ? 1 : failures + 1
        return Self.jitter(baseDelay, using: &random)
    }

    /// The wait before jitter.
    public var baseDelay: Duration {
        guard failures > 0 else { return interval }
        let doublings = min(failures - 1, 30)
        let delay = backoffMinimum * (1 << doublings)
        return min(delay, backoffMaximum)
    }

    static func jitter(_ delay: Duration, using random: inout some RandomNumberGenerator) -> Duration {
        delay * Double.random(in: 0.9...1.1, using: &random)
    }
}
