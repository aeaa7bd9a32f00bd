import CairnClient
import CairnTestSupport
import Foundation
import Testing

@Suite("Bad requests get stable codes", .offCooperativePool)
struct BadRequestTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var method = "POST"
        var path = "/v1/search"
        var body: [UInt8]?
        var contentType: String? = "application/json"
        var status: Int
        var code: String
        var testDescription: String { name }

        init(_ name: String, json: String? = nil, method: String = "POST", path: String = "/v1/search",
             contentType: String? = "application/json", status: Int, code: String) {
            self.name = name
            self.body = json.map { Array($0.utf8) }
            self.method = method
            self.path = path
            self.contentType = contentType
            self.status = status
            self.code = code
        }

        /// A body given as bytes (not UTF-8, or with a byte-order mark).
        init(_ name: String, bytes: [UInt8], path: String = "/v1/search", status: Int, code: String) {
            self.init(name, path: path, status: status, code: code)
            body = bytes
        }
    }

    /// A byte-order mark: Foundation's decoder skips it, the check for repeated keys does not.
    static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// Query text that must never be echoed in an error message.
    static let secret = "zebra-secret-phrase"

    static let cases: [Case] = [
        Case("malformed JSON", json: #"{"query": "\#(secret)""#, status: 400, code: "bad_json"),
        Case("not an object", json: #"["\#(secret)"]"#, status: 400, code: "bad_json"),
        Case("query not a string", json: #"{"query": 12}"#, status: 400, code: "bad_json"),
        Case("query missing", json: #"{"k": 3}"#, status: 400, code: "missing_field"),
        Case("unknown mode", json: #"{"query": "\#(secret)", "mode": "fuzzy"}"#, status: 400, code: "bad_mode"),
        Case("k zero", json: #"{"query": "\#(secret)", "k": 0}"#, status: 400, code: "bad_k"),
        Case("k over 100", json: #"{"query": "\#(secret)", "k": 101}"#, status: 400, code: "bad_k"),
        Case("k a string", json: #"{"query": "\#(secret)", "k": "3"}"#, status: 400, code: "bad_k"),
        Case("k fractional", json: #"{"query": "\#(secret)", "k": 2.5}"#, status: 400, code: "bad_k"),
        // A decoder would keep one of the two silently; which one is not the caller's to guess.
        Case("k twice", json: #"{"query": "\#(secret)", "k": 3, "k": 50}"#, status: 400, code: "bad_json"),
        Case("query twice, the second spelled with an escape", json: #"{"query": "\#(secret)", "\u0071uery": "other"}"#, status: 400, code: "bad_json"),
        Case("k twice behind a byte-order mark", bytes: byteOrderMark + Array(#"{"query": "\#(secret)", "k": 3, "k": 50}"#.utf8),
             status: 400, code: "bad_json"),
        Case("a UTF-16 body", bytes: Array(#"{"query": "\#(secret)", "k": 3, "k": 50}"#.utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] },
             status: 400, code: "bad_json"),
        Case("rollback naming the channel twice behind a byte-order mark", bytes: byteOrderMark + Array(#"{"channel": "a", "channel": "b"}"#.utf8),
             path: "/v1/rollback", status: 400, code: "bad_json"),
        // The caller's own text is not echoed in errors: an unknown key, a channel that is not a name.
        Case("an unknown rollback field", json: #"{"\#(secret)": 1}"#, path: "/v1/rollback", status: 400, code: "unknown_field"),
        Case("a chunk from a channel that is not a channel name", method: "GET", path: "/v1/chunks/v1-water?channel=\(secret)%20x",
             status: 400, code: "unknown_channel"),
        Case("filter key twice", json: #"{"query": "\#(secret)", "filter": {"tags": ["a"], "tags": ["b"]}}"#, status: 400, code: "bad_json"),
        Case("empty query", json: #"{"query": ""}"#, status: 400, code: "empty_query"),
        Case("whitespace query", json: #"{"query": " \n\t "}"#, status: 400, code: "empty_query"),
        Case("invisible query (zero-width spaces, NUL, a byte-order mark)", json: #"{"query": "\u200b\u200b\u0000\ufeff"}"#, status: 400, code: "empty_query"),
        Case("query over 4 KiB", json: #"{"query": "\#(String(repeating: secret + " ", count: 250))"}"#, status: 413, code: "query_too_long"),
        Case("unknown top-level field", json: #"{"query": "\#(secret)", "limit": 3}"#, status: 400, code: "unknown_field"),
        Case("unknown filter field", json: #"{"query": "\#(secret)", "filter": {"scenaro": "flood"}}"#, status: 400, code: "unknown_field"),
        Case("filter not an object", json: #"{"query": "\#(secret)", "filter": "flood"}"#, status: 400, code: "bad_json"),
        Case("min_similarity out of range", json: #"{"query": "\#(secret)", "min_similarity": 3}"#, status: 400, code: "bad_min_similarity"),
        Case("wrong content type", json: #"{"query": "\#(secret)"}"#, contentType: "text/plain", status: 415, code: "bad_content_type"),
        Case("unknown route", method: "GET", path: "/v1/nothing", status: 404, code: "not_found"),
        Case("wrong method on search", method: "GET", path: "/v1/search", status: 405, code: "method_not_allowed"),
        Case("wrong method on status", json: "{}", method: "POST", path: "/v1/status", status: 405, code: "method_not_allowed"),
    ]

    @Test("Given a bad request, when it reaches the daemon, then it gets its documented status and code, and the message holds no query text",
          arguments: cases)
    func refused(_ badCase: Case) async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(1)
        try await withDaemon(fixture) { socket in
            let response = try await request(socket, badCase.method, badCase.path, body: badCase.body, contentType: badCase.contentType)
            #expect(response.status == badCase.status)
            let body = object(response)
            #expect(body["code"] as? String == badCase.code)
            let message = try #require(body["message"] as? String)
            #expect(!message.isEmpty && !message.contains(Self.secret) && !message.contains("\n"))
            if badCase.status == 405 { #expect(response.headers["allow"] != nil) }
        }
    }

    @Test("Given a 10 MB body, when posted, then 413 body_too_large and the daemon keeps serving")
    func hugeBody() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(1)
        try await withDaemon(fixture) { socket in
            let huge = Array(#"{"query": ""#.utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 10 << 20) + Array(#""}"#.utf8)
            let response = try await request(socket, "POST", "/v1/search", body: huge)
            #expect(response.status == 413)
            #expect(object(response)["code"] as? String == "body_too_large")
            let after = try await request(socket, "POST", "/v1/search", json: #"{"query": "water"}"#)
            #expect(after.status == 200)
        }
    }

    @Test("Given curl's default form content type with a JSON body, when searching, then it is read as JSON")
    func formContentTypeAccepted() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(1)
        try await withDaemon(fixture) { socket in
            let response = try await request(socket, "POST", "/v1/search", json: #"{"query": "flood maps", "k": 1}"#,
                                             contentType: "application/x-www-form-urlencoded")
            #expect(response.status == 200)
            #expect((object(response)["results"] as? [Any])?.count == 1)
        }
    }

    @Test("Given HEAD on a GET endpoint (curl -I, a monitor), then it answers as GET would, without a body: 200 with the GET's length, 404 for a missing chunk; HEAD on search is 405 naming POST")
    func headAnswersAsGet() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(1)
        try await withDaemon(fixture) { socket in
            for path in ["/healthz", "/v1/status", "/v1/chunks/v1-water"] {
                let head = try await request(socket, "HEAD", path)
                #expect(head.status == 200 && head.body.isEmpty, "HEAD \(path): \(head.status)")
                #expect(Int(head.headers["content-length"] ?? "") ?? 0 > 0, "HEAD \(path)")
            }
            let get = try await request(socket, "GET", "/v1/chunks/v1-water")
            let head = try await request(socket, "HEAD", "/v1/chunks/v1-water")
            #expect(head.headers["content-length"] == String(get.body.count))
            #expect(try await request(socket, "HEAD", "/v1/chunks/no-such-chunk").status == 404)
            let search = try await request(socket, "HEAD", "/v1/search")
            #expect(search.status == 405 && search.headers["allow"] == "POST")
            #expect(try await request(socket, "PUT", "/v1/status").headers["allow"] == "GET, HEAD")
        }
    }

    /// Sends `request` on a new connection and reads until the daemon closes it or `wait`
    /// seconds pass: the first line of what came back, and whether the stream ended (the daemon
    /// closed).
    static func exchange(_ socket: String, _ request: String, wait: Int = 20) async throws -> (statusLine: String, closed: Bool) {
        try await onThread { () throws -> (String, Bool) in
            guard case .success(let fd) = UnixSocket.connect(socket, timeout: 5) else { throw StepFailed("cannot connect") }
            defer { close(fd) }
            var limit = timeval(tv_sec: wait, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            let bytes = Array(request.utf8)
            guard bytes.withUnsafeBytes({ Glibc.write(fd, $0.baseAddress, $0.count) }) == bytes.count else { throw StepFailed("cannot write") }
            var received: [UInt8] = [], buffer = [UInt8](repeating: 0, count: 4096), closed = false
            while true {
                let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                if n > 0 { received += buffer[0..<n]; continue }
                closed = n == 0
                break
            }
            let text = String(decoding: received, as: UTF8.self)
            return (text.components(separatedBy: "\r\n").first ?? "", closed)
        }
    }

    @Test("Given an HTTP/1.0 request without keep-alive (a client that reads to the end of the stream), then the daemon answers and closes the connection, long before idle_timeout; with keep-alive, or in HTTP/1.1, the connection stays open")
    func http10Closes() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(1)
        try await withDaemon(fixture, configure: { $0.idleTimeout = 600 }) { socket in
            let plain = try await Self.exchange(socket, "GET /healthz HTTP/1.0\r\n\r\n")
            #expect(plain.statusLine.hasSuffix("200 OK") && plain.closed, "\(plain)")
            let post = try await Self.exchange(socket, "POST /v1/search HTTP/1.0\r\nContent-Length: 17\r\n\r\n{\"query\":\"water\"}")
            #expect(post.statusLine.hasSuffix("200 OK") && post.closed, "\(post)")
        }
        // The stream stays open where the client asked for it: the read's own timeout ends it.
        try await withDaemon(fixture, configure: { $0.idleTimeout = 600 }) { socket in
            let kept = try await Self.exchange(socket, "GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", wait: 2)
            #expect(kept.statusLine.hasSuffix("200 OK") && !kept.closed, "\(kept)")
        }
    }
}
