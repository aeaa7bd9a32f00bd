import CairnDaemon
import CairnTestSupport
import Foundation
import Testing

/// protocol/threat-model.md: the socket's file mode and group are its only access control, so
/// this checks them with real users. Creating users needs root (CI runs as root); the users and
/// the group are left in place, because other test runs on the machine may be using them.
@Suite("Who can reach the socket", .offCooperativePool)
struct SocketAccessTests {
    static let group = "cairn-test-socket"
    static let user = SystemUsers.outsider

    @Test("Given socket_group names a group, when a local user outside it and the same user inside it search with curl, then the outsider is refused by the kernel and the member gets an answer")
    func onlyTheGroupCanQuery() async throws {
        try Tools.requireRoot("create a user and run curl as it")
        try Tools.requireCurl()
        let socketGroup = try await SystemUsers.ensure(group: Self.group)
        let (uid, gid) = try await SystemUsers.ensure(user: Self.user)
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(1)
        // Anyone may enter the folder: only the socket's own mode and group stand in the way.
        chmod(fixture.root, 0o755)
        try await withDaemon(fixture, configure: { $0.socketGroup = Self.group }) { socket in
            func curlAs(_ groups: String) async throws -> Finished {
                try await run("/usr/bin/setpriv", ["--reuid=\(uid)", "--regid=\(gid)", groups, "--", "curl", "-sS", "-v", "--max-time", "20",
                                                   "--unix-socket", socket, "http://localhost/v1/search", "-d", #"{"query":"water"}"#])
            }
            let outsider = try await curlAs("--clear-groups")
            #expect(outsider.status == 7, "curl exit \(outsider.status): \(outsider.stderr)")
            // curl -v names the errno of connect(2).
            #expect(outsider.stderr.contains("Permission denied"))
            #expect(!outsider.stdout.contains("v1-"))
            // cairn says what to do: the user, not cairnd, is the problem. A copy the outsider
            // can run wherever the clone is (under /root, mode 0700, it could not run the build's).
            let copy = fixture.root + "/cairn"
            // By cp(1): a file this process held open for writing could be inherited by a child
            // another test forks meanwhile, and the exec would fail with ETXTBSY.
            let copied = try await run("/bin/cp", [Products.path("cairn"), copy])
            try #require(copied.status == 0, "\(copied.stderr)")
            chmod(copy, 0o755)
            let cairn = try await run("/usr/bin/setpriv", ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--",
                                                           copy, "--socket", socket, "status"])
            #expect(cairn.status == 3, "exit \(cairn.status): \(cairn.stderr)")
            #expect(cairn.stderr.hasPrefix("cairn: cannot reach cairnd at \(socket) (Permission denied); this user may not use the socket")
                    && !cairn.stderr.contains("is cairnd running?"), "\(cairn.stderr)")
            let member = try await curlAs("--groups=\(socketGroup)")
            #expect(member.status == 0, "curl exit \(member.status): \(member.stderr)")
            #expect(member.stdout.contains("\"v1-water\""))
        }
    }

    @Test("Given socket_group names a group cairnd's user is not in, when cairnd starts as that user, then it refuses in one line naming the group (exit 2), rather than start with a socket the group cannot reach")
    func groupMustBeCairndsOwn() async throws {
        try Tools.requireRoot("create a user and run cairnd as it")
        _ = try await SystemUsers.ensure(group: Self.group)
        let (uid, gid) = try await SystemUsers.ensure(user: Self.user)
        let folder = "/tmp/cairn-socket-group-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        chmod(folder, 0o777)
        try "socket_group = \(Self.group)\n".write(toFile: folder + "/cairnd.conf", atomically: true, encoding: .utf8)
        chmod(folder + "/cairnd.conf", 0o644)
        // Under a deadline: a cairnd that started instead would answer until killed.
        let started = try await run("/usr/bin/timeout", ["60", "/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--", Products.path("cairnd"),
                                                         "--config", folder + "/cairnd.conf", "--data-dir", folder + "/data",
                                                         "--socket", folder + "/cairnd.sock"])
        #expect(started.status == 2, "exit \(started.status): \(started.stderr)")
        let lines = started.stderr.split(separator: "\n")
        #expect(lines.count == 1 && started.stderr.contains("socket_group \(Self.group)") && started.stderr.contains("not a member"),
                "\(started.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/cairnd.sock"))
    }
}
