import CairnCore
import CairnTestSupport
import Foundation
import Testing

/// docs/exit-codes.md for `cairn` where the failure is on the caller's side of the socket: its
/// own standard output, an empty argument (an empty query is cairnd's to refuse:
/// `empty_query`, EndToEndTests), something other than cairnd answering.
@Suite("cairn's exit codes on its own side of the socket", .offCooperativePool)
struct CommandLineTests {
    @Test("Given cairnd answering, when `cairn status` writes to a full disk (/dev/full), then it exits 74 with one line saying standard output could not be written, not 0 with nothing written")
    func fullStandardOutput() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(1)
        try await withDaemon(fixture) { socket in
            let cairn = Products.path("cairn")
            let written = try await run("/bin/sh", ["-c", #"exec "$0" --socket "$1" status > /dev/full"#, cairn, socket])
            #expect(written.status == 74, "exit \(written.status): \(written.stderr)")
            #expect(written.stderr == "cairn: cannot write standard output (No space left on device); what it printed is incomplete\n",
                    "\(written.stderr)")
            // The same command to a pipe is fine.
            let piped = try await run(cairn, ["--socket", socket, "status"])
            #expect(piped.status == 0 && piped.stdout.hasPrefix("version     1"), "\(piped.stderr)")
        }
    }

    @Test("Given --help and --version written to a full disk (/dev/full), then each program exits 74 with one line, not 0 with its text lost; to a pipe, 0 with the text")
    func helpToAFullDisk() async throws {
        for (program, flag) in [("cairn", "--help"), ("cairn", "--version"), ("cairn-server", "--help"), ("cairn", "query --help")] {
            let lost = try await run("/bin/sh", ["-c", #"exec "$0" $1 > /dev/full"#, Products.path(program), flag])
            #expect(lost.status == 74 && lost.stderr.contains("cannot write standard output"), "\(program) \(flag): \(lost.status) \(lost.stderr)")
            let shown = try await run("/bin/sh", ["-c", #"exec "$0" $1"#, Products.path(program), flag])
            #expect(shown.status == 0 && !shown.stdout.isEmpty, "\(program) \(flag): \(shown.status) \(shown.stderr)")
        }
    }

    @Test("Given `cairn mcp` whose answers go to a full disk (/dev/full), then it exits 74 with one line, not a crash with a backtrace")
    func mcpFullStandardOutput() async throws {
        let written = try await run("/bin/sh", ["-c", #"printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"ping"}' | exec "$0" --socket /nonexistent/cairnd.sock mcp > /dev/full"#,
                                                Products.path("cairn")])
        #expect(written.status == 74, "exit \(written.status): \(written.stderr)")
        #expect(written.stderr == "cairn mcp: cannot write standard output (No space left on device); stopping\n", "\(written.stderr)")
    }

    @Test("Given an option given twice (-k 3 -k 50, --to a --to=b, --socket before and after the command), then cairn refuses it as a usage error naming it (exit 2), not the last one kept without a word; a value after -- is no option, and query's --tag and --channel repeat")
    func optionGivenTwice() async throws {
        let cairn = Products.path("cairn")
        for (arguments, named) in [(["--socket", "/nonexistent/s", "query", "water", "-k", "3", "-k", "50"], "-k"),
                                   (["--socket", "/nonexistent/s", "export", "--to", "/a", "--to=/b"], "--to"),
                                   (["--socket", "/nonexistent/s", "status", "--socket", "/nonexistent/t"], "--socket")] {
            let refused = try await run(cairn, arguments)
            #expect(refused.status == 2 && refused.stderr == "cairn: \(named) is given twice; give it once (cairn --help)\n",
                    "\(arguments): exit \(refused.status) \(refused.stderr)")
        }
        // Words after `--` are the query's, and `--tag` and `--channel` repeat by design: cairnd
        // is asked (and cannot be reached here, 3).
        for arguments in [["query", "--", "-k", "-k"], ["query", "water", "--tag", "a", "--tag", "b", "--channel", "x", "--channel", "y"],
                          ["search", "water", "--tag=a", "--tag", "b"]] {
            let asked = try await run(cairn, ["--socket", "/nonexistent/s"] + arguments)
            #expect(asked.status == 3, "\(arguments): exit \(asked.status) \(asked.stderr)")
        }
    }

    @Test("Given the three programs, when each is asked --version, then each prints its name, this build's date and the formats it reads, exit 0; cairnd's status carries the date as `software`, and `cairn status` prints both programs' dates")
    func versions() async throws {
        for program in ["cairnd", "cairn", "cairn-server"] {
            let asked = try await run(Products.path(program), ["--version"])
            #expect(asked.status == 0 && asked.stdout == "\(program) \(CairnVersion.date) (reads \(CairnVersion.reads))\n",
                    "\(program): \(asked.stdout) \(asked.stderr)")
        }
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(1)
        try await withDaemon(fixture) { socket in
            let json = try await run(Products.path("cairn"), ["--socket", socket, "status", "--json"])
            let status = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
            #expect(status?["software"] as? String == CairnVersion.date, "\(json.stdout)")
            let text = try await run(Products.path("cairn"), ["--socket", socket, "status"])
            #expect(text.stdout.contains("software    cairnd \(CairnVersion.date), cairn \(CairnVersion.date)\n"), "\(text.stdout)")
        }
    }

    @Test("Given `cairn sync --wait` started before cairnd (`cairnd … & cairn sync --wait`, as the README's tour runs them), when cairnd binds its socket a moment later, then the request reaches it (here: a cairnd without sources answers sync_unavailable, exit 1) instead of exiting 3 at once")
    func syncWaitRidesOutAStartingDaemon() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        try fixture.addVersion(1)
        // cairn starts first; cairnd's start (exec, runtime, lock, bind) then takes longer than
        // cairn's first try, which found no socket and, before 2026-12-06, exited 3 at once.
        async let waited = run(Products.path("cairn"), ["--socket", fixture.socketPath, "sync", "--wait"])
        let daemon = try launch(Products.path("cairnd"), ["--data-dir", fixture.dataDirectory, "--socket", fixture.socketPath],
                                logDirectory: fixture.root)
        defer { if daemon.isRunning { daemon.terminate() } }
        let finished = try await waited
        #expect(finished.status == 1 && finished.stderr.contains("(sync_unavailable)"), "exit \(finished.status): \(finished.stderr)")
    }

    @Test("Given an empty --socket, chunk id or --channel (an unset variable in a script), when cairn runs, then it is a usage error (exit 2, one line naming the argument), not a request sent to an abstract socket or an empty path")
    func emptyArguments() async throws {
        let cairn = Products.path("cairn")
        let cases: [([String], String)] = [
            (["--socket", "", "status"], "--socket is empty"),
            (["status", "--socket", " "], "--socket is empty"),
            (["--socket", "/tmp/none.sock", "get", ""], "the chunk id is empty"),
            (["--socket", "/tmp/none.sock", "query", "water", "--channel", ""], "--channel is empty"),
            (["--socket", "/tmp/none.sock", "rollback", "--channel", ""], "--channel is empty"),
        ]
        for (arguments, message) in cases {
            let finished = try await run(cairn, arguments)
            #expect(finished.status == 2, "\(arguments): exit \(finished.status): \(finished.stderr)")
            #expect(finished.stderr == "cairn: \(message) (cairn --help)\n", "\(arguments): \(finished.stderr)")
        }
    }

    @Test("Given something other than cairnd on the socket answering 200 with bytes that are not JSON, when `cairn status --json` asks, then it exits 1 saying the answer is not JSON, and prints on standard output the error object (bad_answer), never the peer's bytes")
    func jsonAnswerChecked() async throws {
        try requireOrSkip(FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"), "python3 is not installed (apt-get install python3)")
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let socket = folder + "/other.sock"
        // A peer that is not cairnd: each connection gets a 200 whose body is not JSON.
        let script = """
            import os, socket, sys
            s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1] + ".new"); s.listen(8)
            os.rename(sys.argv[1] + ".new", sys.argv[1])  # the socket file appears listening
            print("ready", flush=True)
            while True:
                c, _ = s.accept(); c.recv(65536)
                c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nContent-Length: 9\\r\\n\\r\\n<html>hi<"); c.close()
            """
        let peer = try launch("/usr/bin/python3", ["-c", script, socket], logDirectory: folder)
        defer { stopProcess(peer) }
        try await waitUntil("the peer listens") { FileManager.default.fileExists(atPath: socket) }
        let finished = try await run(Products.path("cairn"), ["--socket", socket, "status", "--json"])
        #expect(finished.status == 1, "exit \(finished.status): \(finished.stderr)")
        #expect(try Self.errorObject(finished.stdout) == ["code": "bad_answer", "message": "cairnd's answer is not JSON; is the daemon the same version as this CLI?"],
                "\(finished.stdout)")
        #expect(finished.stderr == "cairn: cairnd's answer is not JSON; is the daemon the same version as this CLI?\n", "\(finished.stderr)")
    }

    /// The one JSON object a failing `--json` command prints on standard output.
    static func errorObject(_ stdout: String) throws -> [String: String] {
        #expect(stdout.hasSuffix("}\n") && stdout.split(separator: "\n").count == 1, "\(stdout)")
        return try JSONDecoder().decode([String: String].self, from: Data(stdout.utf8))
    }

    @Test("Given --json, when a command fails (cairnd without an index asked a query, a socket nothing listens on), then standard output holds the socket's error object {code, message}, standard error the same line as without --json, and the exit code is the documented one; without --json standard output stays empty")
    func jsonFailuresOnStandardOutput() async throws {
        let fixture = try DataDirectoryFixture()
        defer { fixture.remove() }
        let cairn = Products.path("cairn")
        try await withDaemon(fixture) { socket in
            let plain = try await run(cairn, ["--socket", socket, "query", "boil water"])
            let json = try await run(cairn, ["--socket", socket, "query", "boil water", "--json"])
            #expect(plain.status == 4 && json.status == 4 && plain.stdout.isEmpty, "exit \(plain.status), \(json.status): \(plain.stdout)")
            #expect(json.stderr == plain.stderr && plain.stderr.hasSuffix(" (no_index)\n"), "\(plain.stderr)")
            let object = try Self.errorObject(json.stdout)
            #expect(object["code"] == "no_index" && "cairn: \(object["message"] ?? "") (no_index)\n" == plain.stderr, "\(object)")
        }
        let nowhere = fixture.dataDirectory + "/nobody-listens.sock"
        let plain = try await run(cairn, ["--socket", nowhere, "status"])
        let json = try await run(cairn, ["--socket", nowhere, "status", "--json"])
        #expect(plain.status == 3 && json.status == 3 && plain.stdout.isEmpty && json.stderr == plain.stderr, "\(plain.stderr)")
        let object = try Self.errorObject(json.stdout)
        #expect(object["code"] == "unreachable" && plain.stderr == "cairn: \(object["message"] ?? "")\n", "\(object)")
        // Paths as a person reads them: JSON allows "/" unescaped.
        #expect(json.stdout.contains(nowhere) && !json.stdout.contains("\\/"), "\(json.stdout)")
    }
}
