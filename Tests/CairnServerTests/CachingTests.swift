import CairnCore
import Foundation
import Testing

@Suite("Caching and conditional requests")
struct CachingTests {
    @Test("Given a channel manifest, when it is fetched, then it carries a strong SHA-256 ETag, Last-Modified and no-cache")
    func manifestHeaders() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        try await withServer(repo) { port in
            let response = try await RawHTTP.send(port: port, target: "/channels/stable/manifest.json")
            #expect(response.status == 200)
            #expect(response.body == repo.manifest)
            #expect(response.header("ETag") == "\"\(ContentID(hashing: repo.manifest).hex)\"")
            #expect(response.header("Last-Modified")?.hasSuffix(" GMT") == true)
            #expect(response.header("Cache-Control") == "no-cache")
            #expect(response.header("Content-Type") == "application/json")
            #expect(response.header("Content-Length") == String(repo.manifest.count))
            #expect(response.header("Accept-Ranges") == "bytes")
        }
    }

    @Test("Given a fetched manifest, when it is asked for again with If-None-Match, then the answer is 304 without a body; If-Modified-Since alone is not trusted for a file replaced in place (200 with the bytes)")
    func manifestNotModified() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        try await withServer(repo) { port in
            let first = try await RawHTTP.send(port: port, target: "/channels/stable/manifest.json")
            let etag = try #require(first.header("ETag"))
            let date = try #require(first.header("Last-Modified"))
            let byTag = try await RawHTTP.send(port: port, target: "/channels/stable/manifest.json", headers: ["If-None-Match": etag])
            #expect(byTag.status == 304)
            #expect(byTag.body.isEmpty)
            #expect(byTag.header("ETag") == etag)
            // Until 2026-12-07 a 304: a manifest published twice within one second, or dated
            // back by a clock set back, would have stayed with a cache as it was.
            let byDate = try await RawHTTP.send(port: port, target: "/channels/stable/manifest.json", headers: ["If-Modified-Since": date])
            #expect(byDate.status == 200 && byDate.body == repo.manifest)
            let stale = try await RawHTTP.send(port: port, target: "/channels/stable/manifest.json", headers: ["If-None-Match": "\"0000\""])
            #expect(stale.status == 200)
            #expect(stale.body == repo.manifest)
            let old = try await RawHTTP.send(port: port, target: "/channels/stable/manifest.json",
                                              headers: ["If-Modified-Since": "Sat, 01 Jan 2000 00:00:00 GMT"])
            #expect(old.status == 200)
        }
    }

    @Test("Given a manifest replaced by a newer one, when it is fetched with the old ETag, then the new bytes come with a new ETag")
    func manifestChanges() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        try await withServer(repo) { port in
            let first = try await RawHTTP.send(port: port, target: "/channels/stable/manifest.json")
            let newer = Array(#"{"channel":"stable","version":4}"#.utf8)
            try repo.write("repo/channels/stable/manifest.json", newer)
            let second = try await RawHTTP.send(port: port, target: "/channels/stable/manifest.json",
                                                headers: ["If-None-Match": first.header("ETag") ?? ""])
            #expect(second.status == 200)
            #expect(second.body == newer)
            #expect(second.header("ETag") == "\"\(ContentID(hashing: newer).hex)\"")
        }
    }

    @Test("Given a blob, a version manifest and a root, when they are fetched, then they are immutable for a year, the blob's ETag is its name and time; a blob written again (repaired) answers its old ETag with the new bytes, not 304")
    func immutableHeaders() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        let root = Array("{\"root\":{},\"signatures\":[]}\n".utf8)
        try repo.write("repo/root/2.root.json", root)
        try await withServer(repo) { port in
            let served = try await RawHTTP.send(port: port, target: "/root/2.root.json")
            #expect(served.status == 200 && served.body == root)
            #expect(served.header("Cache-Control") == "public, max-age=31536000, immutable")
            #expect(served.header("Content-Type") == "application/json")
            let blob = try await RawHTTP.send(port: port, target: repo.blobPath)
            #expect(blob.status == 200)
            #expect(blob.body == repo.blob)
            #expect(blob.header("Cache-Control") == "public, max-age=31536000, immutable")
            let etag = try #require(blob.header("ETag"))
            #expect(etag.hasPrefix("\"\(repo.blobHex)-"), "\(etag)")
            #expect(blob.header("Content-Type") == "application/octet-stream")
            let again = try await RawHTTP.send(port: port, target: repo.blobPath, headers: ["If-None-Match": etag])
            #expect(again.status == 304)
            let byDate = try await RawHTTP.send(port: port, target: repo.blobPath, headers: ["If-Modified-Since": blob.header("Last-Modified") ?? ""])
            #expect(byDate.status == 304)
            // Written again as a publish repairs it (a new file renamed over it, a later time).
            let file = repo.root.path + repo.blobPath
            let written = try #require(try FileManager.default.attributesOfItem(atPath: file)[.modificationDate] as? Date)
            try repo.write("repo" + repo.blobPath, repo.blob)
            try FileManager.default.setAttributes([.modificationDate: written.addingTimeInterval(5)], ofItemAtPath: file)
            let repaired = try await RawHTTP.send(port: port, target: repo.blobPath, headers: ["If-None-Match": etag])
            #expect(repaired.status == 200 && repaired.body == repo.blob && repaired.header("ETag") != etag)
            let version = try await RawHTTP.send(port: port, target: "/channels/stable/versions/3.json")
            #expect(version.status == 200)
            #expect(version.body == repo.manifest)
            #expect(version.header("Cache-Control") == "public, max-age=31536000, immutable")
        }
    }

    @Test("Given a blob, when HEAD is sent, then Content-Length is the blob's size and no body follows")
    func head() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        try await withServer(repo) { port in
            let response = try await RawHTTP.send(port: port, method: "HEAD", target: repo.blobPath)
            #expect(response.status == 200)
            #expect(response.header("Content-Length") == String(repo.blob.count))
            #expect(response.header("ETag")?.hasPrefix("\"\(repo.blobHex)-") == true)
            #expect(response.body.isEmpty)
            let manifest = try await RawHTTP.send(port: port, method: "HEAD", target: "/channels/stable/manifest.json")
            #expect(manifest.header("Content-Length") == String(repo.manifest.count))
            #expect(manifest.body.isEmpty)
        }
    }

    @Test("Given a public key under keys/, when fetched, then it is served and revalidated (it may change in a key rotation)")
    func publicKey() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        try await withServer(repo) { port in
            let response = try await RawHTTP.send(port: port, target: "/keys/publisher.pub")
            #expect(response.status == 200)
            #expect(String(decoding: response.body, as: UTF8.self) == "cairn-ed25519-public-v1 AAAA\n")
            #expect(response.header("Cache-Control") == "no-cache")
        }
    }
}
