import CairnTestSupport
import Foundation
import Testing

@Suite("cairn-server serve as a real process", .offCooperativePool)
struct ServeProcessTests {
    static var binary: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("cairn-server")
    }

    /// The first line the server writes on `output` (its port line), or what came before it
    /// closed.
    static func firstLine(of output: ChildPipe) async throws -> String {
        let reader = output.fileHandleForReading
        return try await RawHTTP.onThread { () -> String in
            var text = ""
            while !text.contains("\n") {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                text += String(decoding: chunk, as: UTF8.self)
            }
            return text
        }
    }

    @Test("Given the built binary with --port 0, when started, fetched from and sent SIGTERM, then it prints its port, serves, and exits 0")
    func endToEnd() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        let process = Process()
        process.executableURL = Self.binary
        process.arguments = ["serve", "--repo", repo.root.path, "--port", "0", "--host", "127.0.0.1"]
        let output = childPipe()
        process.standardOutput = output.fileHandleForWriting
        process.standardError = FileHandle.nullDevice
        try process.spawn()
        output.started()
        defer { if process.isRunning { process.terminate() } }
        let line = try await Self.firstLine(of: output)
        let prefix = "cairn-server: serving \(repo.root.path) on http://127.0.0.1:"
        #expect(line.hasPrefix(prefix))
        let port = try #require(Int(line.dropFirst(prefix.count).prefix { $0.isNumber }))
        let response = try await RawHTTP.send(port: port, target: "/channels/stable/manifest.json")
        #expect(response.status == 200)
        #expect(response.body == repo.manifest)
        kill(process.processIdentifier, SIGTERM)
        try await RawHTTP.onThread { process.waitUntilExit() }
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
    }

    @Test("Given a blob the server's user may not read (a publish under umask 077 served by the unit's DynamicUser), or one in a folder it may not search, when it is fetched, then the answer is 500 and the log says which file and what to do, rather than 200 and a cut connection or a 404; the manifest it can read is served")
    func unreadableBlob() async throws {
        try Tools.requireRoot("run the server as another user")
        let (uid, gid) = try await SystemUsers.ensure(user: SystemUsers.outsider)
        let repo = try TestRepository()
        defer { repo.remove() }
        chmod(repo.root.path + repo.blobPath, 0o600)
        // A copy the other user can run wherever the clone is, written by cp(1): a file this
        // process held open for writing could be inherited by a child another test forks
        // meanwhile, and its exec would then fail with ETXTBSY.
        let copy = repo.base.path + "/cairn-server"
        let copied = try await run("/bin/cp", [Self.binary.path, copy])
        try #require(copied.status == 0, "\(copied.stderr)")
        chmod(copy, 0o755)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--", copy,
                             "serve", "--repo", repo.root.path, "--port", "0", "--host", "127.0.0.1"]
        let output = childPipe(), errors = childPipe()
        process.standardOutput = output.fileHandleForWriting
        process.standardError = errors.fileHandleForWriting
        try process.spawn()
        output.started()
        errors.started()
        defer { if process.isRunning { process.terminate() } }
        let line = try await Self.firstLine(of: output)
        let prefix = "cairn-server: serving \(repo.root.path) on http://127.0.0.1:"
        guard let port = Int(line.dropFirst(prefix.count).prefix { $0.isNumber }) else {
            process.terminate()
            let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            Issue.record("no port line: \(line); standard error: \(said.suffix(600))")
            return
        }
        #expect(try await RawHTTP.send(port: port, target: repo.blobPath).status == 500)
        #expect(try await RawHTTP.send(port: port, target: "/channels/stable/manifest.json").status == 200)
        // A folder on the way it may not search (made under umask 077): 500 too, not the 404
        // a device takes for "not held here" (until 2026-12-07).
        chmod(repo.root.path + repo.blobPath, 0o644)
        chmod((repo.root.path + repo.blobPath as NSString).deletingLastPathComponent, 0o700)
        #expect(try await RawHTTP.send(port: port, target: repo.blobPath).status == 500)
        kill(process.processIdentifier, SIGTERM)
        let log = try await RawHTTP.onThread { String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) }
        try await RawHTTP.onThread { process.waitUntilExit() }
        #expect(log.contains("a repository file cannot be read; answered 500") && log.contains("Permission denied")
                && log.contains(String(repo.blobPath.dropFirst())), "\(log)")
        #expect(log.contains("a repository folder cannot be searched; answered 500"), "\(log)")
    }

    @Test("Given a private key under the repository, when the binary starts, then it exits non-zero saying why")
    func refusesKey() async throws {
        let repo = try TestRepository()
        defer { repo.remove() }
        try repo.write("repo/publisher.key", Array("cairn-ed25519-private-v1 AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=\n".utf8))
        let process = Process()
        process.executableURL = Self.binary
        process.arguments = ["serve", "--repo", repo.root.path, "--port", "0"]
        let errors = childPipe()
        process.standardError = errors.fileHandleForWriting
        process.standardOutput = FileHandle.nullDevice
        try process.spawn()
        errors.started()
        let text = try await RawHTTP.onThread { String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) }
        try await RawHTTP.onThread { process.waitUntilExit() }
        #expect(process.terminationStatus == 77)
        #expect(text.contains("private signing key"))
        #expect(!text.contains("AQIDBAUG"))
    }
}
