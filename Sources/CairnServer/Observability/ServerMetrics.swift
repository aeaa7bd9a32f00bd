import CoreMetrics
import Metrics
import Prometheus
import Synchronization

/// The server's Prometheus metrics, kept in a registry of its own (injected through a
/// `PrometheusMetricsFactory`, so the global `MetricsSystem` is never bootstrapped and several
/// servers can live in one process):
/// - `cairn_http_requests_total{kind,status}`: requests by route kind and status code
/// - `cairn_http_sent_bytes_total{kind}`: response body bytes sent
/// - `cairn_http_request_duration_seconds{kind}`: latency histogram, until the body is sent
final class ServerMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    private let requests = Mutex<[String: CoreMetrics.Counter]>([:])
    private let kinds = Mutex<[String: (bytes: CoreMetrics.Counter, latency: CoreMetrics.Timer)]>([:])

    init() {
        registry = PrometheusCollectorRegistry()
        factory = PrometheusMetricsFactory(registry: registry)
    }

    func record(kind: String, status: Int, bytes: Int, duration: Duration) {
        let key = kind + " " + String(status)
        let counter = requests.withLock { cache in
            if let counter = cache[key] { return counter }
            let counter = CoreMetrics.Counter(label: "cairn_http_requests_total",
                                  dimensions: [("kind", kind), ("status", String(status))], factory: factory)
            cache[key] = counter
            return counter
        }
        let perKind = kinds.withLock { cache in
            if let found = cache[kind] { return found }
            let made = (bytes: CoreMetrics.Counter(label: "cairn_http_sent_bytes_total", dimensions: [("kind", kind)], factory: factory),
                        latency: CoreMetrics.Timer(label: "cairn_http_request_duration_seconds",
                                               dimensions: [("kind", kind)], factory: factory))
            cache[kind] = made
            return made
        }
        counter.increment()
        if bytes > 0 { perKind.bytes.increment(by: bytes) }
        let (seconds, attoseconds) = duration.components
        perKind.latency.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// The Prometheus text exposition of every metric.
    func exposition() -> [UInt8] {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return buffer
    }
}
