/// How many requested attempts may start now (a token bucket): `burst` at once, then one per
/// `interval`. A caller that asks for a sync in a loop gets one attempt per `interval`, not an
/// attempt after each, which over a metered link would be a stream of manifest requests.
struct RequestAllowance {
    let interval: Duration
    let burst: Int
    private var tokens: Double
    private var updated: ContinuousClock.Instant?

    /// A full allowance. `interval` zero: no limit.
    init(interval: Duration, burst: Int) {
        self.interval = interval
        self.burst = max(1, burst)
        tokens = Double(self.burst)
    }

    /// Takes one attempt's allowance at `now`: nil when it was there (the attempt starts now),
    /// or how long until it is (nothing taken; ask again then).
    mutating func take(at now: ContinuousClock.Instant) -> Duration? {
        guard interval > .zero else { return nil }
        if let updated {
            tokens = min(Double(burst), tokens + (now - updated) / interval)
        }
        updated = now
        // A wait of the length returned refills a whole attempt but for rounding.
        if tokens >= 1 - 1e-9 {
            tokens = max(0, tokens - 1)
            return nil
        }
        let milliseconds = ((1 - tokens) * (interval / .milliseconds(1))).rounded(.up)
        return .milliseconds(Int64(milliseconds))
    }
}
