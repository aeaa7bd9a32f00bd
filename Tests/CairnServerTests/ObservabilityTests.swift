import CairnTestSupport
import Logging
import Testing

@Suite("Health, metrics and logs")
struct ObservabilityTests {
    @Test("Given a running server, when /healthz is fetched, then 200 {\"status\":\"ok\"}")
    func health() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        try await withServer(repo) { port in
            let response = try await RawHTTP.send(port: port, target: "/healthz")
            #expect(response.status == 200)
            #expect(String(decoding: response.body, as: UTF8.self) == #"{"status":"ok"}"#)
        }
    }

    @Test("Given a few requests, when /metrics is fetched, then the request counter, bytes and latency histogram show them")
    func metrics() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        try await withServer(repo) { port in
            for _ in 0..<3 { _ = try await RawHTTP.send(port: port, target: "/channels/stable/manifest.json") }
            _ = try await RawHTTP.send(port: port, target: repo.blobPath)
            _ = try await RawHTTP.send(port: port, target: "/nope")
            let text = String(decoding: try await RawHTTP.send(port: port, target: "/metrics").body, as: UTF8.self)
            #expect(text.contains(#"cairn_http_requests_total{kind="manifest",status="200"} 3"#))
            #expect(text.contains(#"cairn_http_requests_total{kind="blob",status="200"} 1"#))
            #expect(text.contains(#"cairn_http_requests_total{kind="not_found",status="404"} 1"#))
            #expect(text.contains(#"cairn_http_sent_bytes_total{kind="blob"} \#(repo.blob.count)"#))
            #expect(text.contains(#"cairn_http_request_duration_seconds_count{kind="manifest"} 3"#))
        }
    }

    @Test("Given a request, when it is answered, then one info line carries cairn.http.path and status")
    func accessLog() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        let lines = LogCapture()
        let logger = Logger(label: "test") { _ in lines }
        try await withServer(repo, logger: logger) { port in
            _ = try await RawHTTP.send(port: port, target: "/channels/stable/manifest.json")
        }
        let requestLines = lines.entries.filter { $0.message == "request" }
        #expect(requestLines.count == 1)
        #expect(requestLines.first?.level == .info)
        #expect(requestLines.first?.metadata["cairn.http.path"] == "/channels/stable/manifest.json")
        #expect(requestLines.first?.metadata["cairn.http.status"] == "200")
    }
}
