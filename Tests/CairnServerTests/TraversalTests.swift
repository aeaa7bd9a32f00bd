import Foundation
import Testing

@Suite("Nothing outside the served files")
struct TraversalTests {
    /// Every attempt sent byte for byte; none may return the secret or any file's bytes.
    static let attempts: [(target: String, status: Int)] = [
        ("/channels/../../secret", 400),
        ("/channels/stable/../../../secret", 400),
        ("/../secret", 400),
        ("/./channels/stable/manifest.json", 400),
        ("/channels/stable//manifest.json", 400),
        ("/channels%2F..%2F..%2Fsecret", 400),
        ("/channels/%2e%2e/%2e%2e/secret", 400),
        ("/channels/stable/%2E%2E/%2E%2E/%2E%2E/secret", 400),
        ("/channels/stable/manifest%2ejson", 400),
        ("/channels\\..\\..\\secret", 400),
        ("/channels/stable/manifest.json%00.txt", 400),
        ("/channels/stable/.publish.lock", 404),
        ("/blobs/sha256/ab/.tmp-123", 404),
        ("/.git/config", 404),
        ("/secret", 404),
        ("/repo/channels/stable/manifest.json", 404),
        ("/channels/stable", 404),
        ("/channels/stable/versions/03.json", 404),
        ("/blobs/sha256/00/" + String(repeating: "a", count: 64), 404),
        ("/keys/.hidden", 404),
        ("/channels/Stable/manifest.json", 404),
        ("/root/01.root.json", 404),
        ("/root/1.json", 404),
        ("/root/.1.root.json", 404),
        ("/staged/stable/4.json", 404),
    ]

    @Test("Given traversal attempts (dot segments, %2F, %2e%2e, backslashes, NUL, dotfiles, other folders), when sent raw, then each is refused with 400 or 404")
    func refused() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        try await withServer(repo) { port in
            for attempt in Self.attempts {
                let target = attempt.target.replacingOccurrences(of: "/ab/", with: "/\(repo.blobHex.prefix(2))/")
                let response = try await RawHTTP.send(port: port, target: target)
                #expect(response.status == attempt.status, "\(target)")
                #expect(!String(decoding: response.body, as: UTF8.self).contains("secret"), "\(target)")
            }
            // A literal NUL byte in the request line: refused (the HTTP parser rejects it).
            let nul = try await RawHTTP.send(port: port, target: "/channels/stable/manifest.json\u{0}")
            #expect(nul.status == 400)
        }
    }

    @Test("Given symlinks in the repository, when fetched, then one leading outside the root or to a dotfile is 404, one to a file inside is served")
    func symlinks() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        let fm = FileManager.default
        try fm.createSymbolicLink(atPath: repo.root.path + "/keys/outside.pub", withDestinationPath: repo.base.path + "/secret")
        try fm.createSymbolicLink(atPath: repo.root.path + "/channels/escape", withDestinationPath: repo.base.path)
        try fm.createSymbolicLink(atPath: repo.root.path + "/keys/lock.pub", withDestinationPath: "../channels/stable/.publish.lock")
        try fm.createSymbolicLink(atPath: repo.root.path + "/channels/stable/versions/4.json", withDestinationPath: "3.json")
        try await withServer(repo) { port in
            #expect(try await RawHTTP.send(port: port, target: "/keys/outside.pub").status == 404)
            #expect(try await RawHTTP.send(port: port, target: "/channels/escape/manifest.json").status == 404)
            #expect(try await RawHTTP.send(port: port, target: "/keys/lock.pub").status == 404)
            let inside = try await RawHTTP.send(port: port, target: "/channels/stable/versions/4.json")
            #expect(inside.status == 200)
            #expect(inside.body == repo.manifest)
        }
    }

    @Test("Given --repo a symlink to the repository (a mirror updated blue/green), when the link is swapped to another folder, then the next request is served from that folder; a private key there is still never served")
    func swappedRootSymlink() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        let link = repo.base.path + "/current"
        let newer = Array(#"{"channel":"stable","version":4}"#.utf8)
        try repo.write("repo-2/channels/stable/manifest.json", newer)
        try repo.write("repo-3/channels/stable/manifest.json", newer)
        try repo.write("repo-3/keys/publisher.key", Array("cairn-ed25519-private-v1 AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=\n".utf8))
        /// Points the link at `folder` atomically, as `ln -sfn` does: a new link renamed over it.
        @Sendable func point(at folder: String) throws {
            try FileManager.default.createSymbolicLink(atPath: link + ".new", withDestinationPath: folder)
            #expect(rename(link + ".new", link) == 0)
        }
        try point(at: "repo")
        try await withServer(repo, configure: { $0.repository = link }) { port in
            #expect(try await RawHTTP.send(port: port, target: "/channels/stable/manifest.json").body == repo.manifest)
            try point(at: "repo-2")
            let swapped = try await RawHTTP.send(port: port, target: "/channels/stable/manifest.json")
            #expect(swapped.status == 200 && swapped.body == newer, "\(swapped.status)")
            try point(at: "repo-3")
            #expect(try await RawHTTP.send(port: port, target: "/keys/publisher.key").status == 404)
        }
    }

    @Test("Given a private key copied under the root after start-up, when fetched where a key or a manifest may live, then 404 and its bytes never come back")
    func privateKeyCopiedLater() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        let key = "cairn-ed25519-private-v1 AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=\n"
        try await withServer(repo) { port in
            // Start-up refuses a root holding a key (StartupTests); this one arrives while serving.
            for relative in ["keys/publisher.key", "channels/stable/versions/9.json"] {
                try repo.write("repo/" + relative, Array(key.utf8))
                let response = try await RawHTTP.send(port: port, target: "/" + relative)
                #expect(response.status == 404, "\(relative)")
                #expect(!String(decoding: response.body, as: UTF8.self).contains("AQIDBAUG"), "\(relative)")
            }
            // The public key beside it is still served.
            #expect(try await RawHTTP.send(port: port, target: "/keys/publisher.pub").status == 200)
        }
    }

    @Test("Given a method other than GET or HEAD, when sent, then 405 with Allow")
    func methods() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        try await withServer(repo) { port in
            let response = try await RawHTTP.send(port: port, method: "DELETE", target: "/channels/stable/manifest.json")
            #expect(response.status == 405)
            #expect(response.header("Allow") == "GET, HEAD")
        }
    }
}
