import CairnClient
import CairnCore
import Foundation
import Prometheus

/// cairnd's Prometheus metrics (`GET /metrics` on its socket), in a registry of its own. Every
/// series carries the `channel` label.
/// - `cairnd_queries_total{mode,outcome}`: searches by requested mode and outcome (`ok` or the
///   error code); `cairnd_query_duration_seconds{mode}`: their latency.
/// - `cairnd_sync_attempts_total{outcome}`: `installed`, `up_to_date` or the error code;
///   `cairnd_downloaded_bytes_total{path}`: bytes received by attempts that installed by `delta`
///   or `full`, and by the others (`check`: manifests and roots).
/// - Gauges read from the status at each scrape: `cairnd_installed_version`,
///   `cairnd_seconds_since_last_check` (−1 before any), `cairnd_online`, `cairnd_stale`,
///   `cairnd_expired` (1/0), `cairnd_expired_installs`, `cairnd_trusted_root_version` (0 when pinned to keys).
public final class DaemonMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    let channel: String

    /// The metrics of `channel`, in `registry` (one per daemon, shared by its channels).
    public init(channel: String, registry: MetricsRegistry = MetricsRegistry()) {
        self.channel = channel
        self.registry = registry.registry
    }

    private func name(_ metric: String, _ unit: String = "", _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: metric, unitName: unit, helpText: help)
    }

    func recordQuery(mode: String, outcome: String, duration: Duration) {
        registry.makeCounter(descriptor: name("cairnd_queries", "total", "Searches by requested mode and outcome."),
                             labels: [("channel", channel), ("mode", mode), ("outcome", outcome)]).increment()
        registry.makeDurationHistogram(
            descriptor: name("cairnd_query_duration", "seconds", "Search latency on the socket."),
            labels: [("channel", channel), ("mode", mode)],
            buckets: [.milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
                      .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5)]
        ).record(duration)
    }

    /// One sync attempt: its outcome label, how it installed (`delta`, `full`) or nil, and the bytes it received.
    public func recordSync(outcome: String, path: String?, bytes: Int64) {
        registry.makeCounter(descriptor: name("cairnd_sync_attempts", "total", "Sync attempts by outcome."),
                             labels: [("channel", channel), ("outcome", outcome)]).increment()
        registry.makeCounter(descriptor: name("cairnd_downloaded_bytes", "total", "Bytes received, by install path."),
                             labels: [("channel", channel), ("path", path ?? "check")]).increment(by: bytes)
    }

    /// The text exposition of every channel in the registry, after setting this channel's gauges
    /// from `status` (set the others' first with `setGauges`).
    func exposition(status: DaemonStatus.Sync, version: Int?, now: Date = Date()) -> [UInt8] {
        setGauges(status: status, version: version, now: now)
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return buffer
    }

    /// Sets this channel's gauges from its status.
    func setGauges(status: DaemonStatus.Sync, version: Int?, now: Date = Date()) {
        func gauge(_ metric: String, _ help: String, _ value: Double) {
            registry.makeGauge(descriptor: name(metric, "", help), labels: [("channel", channel)]).set(value)
        }
        func flag(_ value: Bool?) -> Double { value == true ? 1 : 0 }
        gauge("cairnd_installed_version", "The version being served (0: none).", Double(version ?? 0))
        // A check stamped more than a minute ahead of the clock has no age (`Timestamp.age`):
        // unknown, as `stale` takes it, not "just now" for as long as the clock is behind.
        let age = status.lastCheck.flatMap(Timestamp.init(rfc3339:))?.age(at: now)
        gauge("cairnd_seconds_since_last_check", "Seconds since a source last answered with a verified manifest (-1: never, or stamped ahead of the clock).",
              age.map { max(0, $0).rounded() } ?? -1)
        gauge("cairnd_online", "1 when the last attempt reached a source.", flag(status.online))
        gauge("cairnd_stale", "1 when the installed version is stale.", flag(status.stale))
        gauge("cairnd_expired", "1 when the installed manifest is past its expiry.", flag(status.expired))
        gauge("cairnd_expired_installs", "Expired but newer versions installed.", Double(status.expiredInstalls ?? 0))
        gauge("cairnd_trusted_root_version", "The trusted root's version (0: pinned keys).", Double(status.trust?.rootVersion ?? 0))
    }
}

/// The Prometheus registry a daemon's channels share.
public final class MetricsRegistry: Sendable {
    let registry = PrometheusCollectorRegistry()

    public init() {}
}
