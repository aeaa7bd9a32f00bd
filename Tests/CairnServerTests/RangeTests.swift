import Testing

@Suite("Byte ranges")
struct RangeTests {
    @Test("Given a blob, when bytes=a-b, a- and -n are asked for (a last position or a suffix of more digits than an Int holds included), then 206 brings exactly those bytes with Content-Range")
    func satisfiable() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        let size = repo.blob.count
        let cases: [(String, Range<Int>)] = [
            ("bytes=10-99", 10..<100), ("bytes=1000-", 1000..<size), ("bytes=-500", (size - 500)..<size),
            ("bytes=0-999999999", 0..<size), ("bytes=0-9999999999999999999", 0..<size),
            ("bytes=-99999999999999999999999", 0..<size), ("bytes=0-00000000000000000001", 0..<2),
            ("bytes=0000000000000000000-", 0..<size),
        ]
        try await withServer(repo) { port in
            for (header, expected) in cases {
                let response = try await RawHTTP.send(port: port, target: repo.blobPath, headers: ["Range": header])
                #expect(response.status == 206, "\(header)")
                #expect(response.body == Array(repo.blob[expected]), "\(header)")
                #expect(response.header("Content-Length") == String(expected.count), "\(header)")
                #expect(response.header("Content-Range") == "bytes \(expected.lowerBound)-\(expected.upperBound - 1)/\(size)", "\(header)")
            }
            let manifest = try await RawHTTP.send(port: port, target: "/channels/stable/manifest.json", headers: ["Range": "bytes=1-4"])
            #expect(manifest.status == 206)
            #expect(manifest.body == Array(repo.manifest[1...4]))
        }
    }

    @Test("Given a blob, when an unsatisfiable or malformed range is asked for, then 416 says the size and is not cached")
    func unsatisfiable() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        let size = repo.blob.count
        try await withServer(repo) { port in
            for header in ["bytes=\(size)-", "bytes=\(size + 5)-\(size + 10)", "bytes=50-10", "bytes=-0", "bytes=abc", "bytes=", "bytes=1-2-3", "bytes=--5",
                           "bytes=99999999999999999999-", "bytes=-0000000000000000000000"] {
                let response = try await RawHTTP.send(port: port, target: repo.blobPath, headers: ["Range": header])
                #expect(response.status == 416, "\(header)")
                #expect(response.header("Content-Range") == "bytes */\(size)", "\(header)")
                #expect(response.body.isEmpty, "\(header)")
                // Not the blob's year-long immutable caching: a cache would answer every resume with it.
                #expect(response.header("Cache-Control") == "no-store", "\(header)")
            }
        }
    }

    @Test("Given a blob, when several ranges or a range with a stale If-Range are asked for, then the whole blob comes with 200")
    func fullAnswers() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        try await withServer(repo) { port in
            let multi = try await RawHTTP.send(port: port, target: repo.blobPath, headers: ["Range": "bytes=0-1,5-6"])
            #expect(multi.status == 200)
            #expect(multi.body == repo.blob)
            let stale = try await RawHTTP.send(port: port, target: repo.blobPath, headers: ["Range": "bytes=0-1", "If-Range": "\"other\""])
            #expect(stale.status == 200)
            #expect(stale.body.count == repo.blob.count)
            let etag = multi.header("ETag") ?? ""
            let current = try await RawHTTP.send(port: port, target: repo.blobPath, headers: ["Range": "bytes=0-1", "If-Range": etag])
            #expect(current.status == 206)
            #expect(current.body == Array(repo.blob[0...1]))
        }
    }
}
