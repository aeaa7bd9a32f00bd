import CairnClient
import CairnTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Each program started, as a real process, into each start-up failure a newcomer meets: the
/// answer is one line on standard error that names what failed and where and says what to do,
/// with the exit code docs/exit-codes.md gives for it.
@Suite("Start-up failures: one line, the place, what to do, a documented exit code", .offCooperativePool)
struct StartupFailureTests {
    /// Runs `program` to completion off the cooperative pool; checks the exit code and that
    /// standard error is one line starting with the program's name and holding every fragment.
    func expectOneLine(_ program: String, _ arguments: [String], in folder: String, exit code: Int32,
                       saying fragments: [String],
                       sourceLocation: SourceLocation = #_sourceLocation) async throws {
        // A start that must be refused ends at once: one that started instead fails here.
        let run = try await onThread { try Binaries.run(program, arguments, in: folder, seconds: 60) }
        let lines = run.error.split(separator: "\n", omittingEmptySubsequences: true)
        #expect(run.status == code, "exit \(run.status), stderr: \(run.error)", sourceLocation: sourceLocation)
        #expect(lines.count == 1, "stderr is not one line: \(run.error)", sourceLocation: sourceLocation)
        #expect(run.error.hasPrefix("\(program): "), "stderr: \(run.error)", sourceLocation: sourceLocation)
        for fragment in fragments {
            #expect(run.error.contains(fragment), "missing \"\(fragment)\" in: \(run.error)", sourceLocation: sourceLocation)
        }
    }

    // MARK: cairnd

    @Test("Given a socket whose folder does not exist, when cairnd starts, then it exits 1 naming the folder and how to create it")
    func cairndSocketFolderMissing() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let socket = folder + "/missing/cairnd.sock"
        try await expectOneLine("cairnd", ["--data-dir", folder + "/data", "--socket", socket], in: folder, exit: 1,
                                saying: [socket, "mkdir -p \(folder)/missing", "--socket"])
        #expect(!FileManager.default.fileExists(atPath: folder + "/missing"))
        #expect(!FileManager.default.fileExists(atPath: folder + "/data"), "a start that cannot answer left a data directory")
    }

    @Test("Given another process serving the socket path, when cairnd starts, then it exits 1 saying so and leaves that socket alone")
    func cairndSocketInUse() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let socket = folder + "/cairnd.sock"
        let listener = try UnixListener(path: socket)
        defer { listener.close() }
        try await expectOneLine("cairnd", ["--data-dir", folder + "/data", "--socket", socket], in: folder, exit: 1,
                                saying: ["another process is serving the socket \(socket)", "stop it first"])
        #expect(UnixSocket.probe(socket) == .accepting)
    }

    @Test("Given a data directory another process holds the lock of, when cairnd starts, then it exits 1 naming the directory")
    func cairndDataDirectoryLocked() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let data = folder + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        let lock = open(data + "/lock", O_RDONLY | O_CREAT | O_CLOEXEC, 0o644)
        try #require(lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) == 0)
        defer { close(lock) }
        try await expectOneLine("cairnd", ["--data-dir", data, "--socket", folder + "/cairnd.sock"], in: folder, exit: 1,
                                saying: ["data directory \(data)", "--data-dir"])
        #expect(!FileManager.default.fileExists(atPath: folder + "/cairnd.sock"))
    }

    @Test("Given a data directory holding a version under a read-only bind mount of a writable file system (as ProtectSystem=strict makes of a folder not in ReadWritePaths=), when cairnd starts, then it exits 1 naming ReadWritePaths=, not served as a failing disk's would be")
    func cairndReadOnlyView() async throws {
        try Tools.requireMount("bind-mount a data directory read-only")
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let data = folder + "/data"
        try FileManager.default.createDirectory(atPath: data + "/versions/1", withIntermediateDirectories: true)
        #expect(symlink("versions/1", data + "/current") == 0)
        for arguments in [["--bind", data, data], ["-o", "remount,bind,ro", data]] {
            let mount = try Binaries.run("/bin/mount", arguments, in: "/tmp")
            guard mount.status == 0 else { throw StepFailed("mount \(arguments): \(mount.error)") }
        }
        defer { _ = try? Binaries.run("/bin/umount", ["-l", data], in: "/tmp") }
        try await expectOneLine("cairnd", ["--data-dir", data, "--socket", folder + "/cairnd.sock"], in: folder, exit: 1,
                                saying: ["cannot write to the data directory \(data)", "ReadWritePaths="])
    }

    @Test("Given a data directory this user cannot write, when cairnd starts, then it exits 1 naming it and the fix")
    func cairndDataDirectoryUnwritable() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let data = folder + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        // Root may write into any folder whatever its mode: as root the data directory is a
        // tmpfs mounted read-only (a card mounted read-only in the field); otherwise the folder
        // is made read-only for this user.
        let reason: String
        if getuid() == 0 {
            try Tools.requireMount("mount a read-only tmpfs (root writes through any folder's mode)")
            let mount = try Binaries.run("/bin/mount", ["-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", data], in: "/tmp")
            guard mount.status == 0 else { throw StepFailed("mount a read-only tmpfs: \(mount.error)") }
            // Not "chown", which cannot mend it (since 2026-12-06).
            reason = "Read-only file system); its file system is read-only: remount it read-write"
        } else {
            chmod(data, 0o555)
            reason = "Permission denied"
        }
        defer {
            if getuid() == 0 { _ = try? Binaries.run("/bin/umount", ["-l", data], in: "/tmp") } else { chmod(data, 0o755) }
        }
        try await expectOneLine("cairnd", ["--data-dir", data, "--socket", folder + "/cairnd.sock"], in: folder, exit: 1,
                                saying: ["cannot write to the data directory \(data)", reason, "--data-dir"])
    }

    @Test("Given a data directory path that runs through a file, when cairnd starts, then it exits 1 naming the file")
    func cairndDataDirectoryThroughFile() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        FileManager.default.createFile(atPath: folder + "/file", contents: Data("x".utf8))
        try await expectOneLine("cairnd", ["--data-dir", folder + "/file/data", "--socket", folder + "/cairnd.sock"],
                                in: folder, exit: 1, saying: ["\(folder)/file is not a folder", "--data-dir"])
    }

    @Test("Given a config file that is missing or a folder, when cairnd starts, then it exits 2 naming the file and why")
    func cairndConfigUnreadable() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await expectOneLine("cairnd", ["--config", folder + "/none.conf"], in: folder, exit: 2,
                                saying: ["cannot read the config file \(folder)/none.conf", "No such file", "--config"])
        try await expectOneLine("cairnd", ["--config", folder], in: folder, exit: 2,
                                saying: ["cannot read the config file \(folder)", "Is a directory", "--config"])
    }

    @Test("Given a trusted root that is missing, not a root, or set beside a trusted key, when cairnd starts, then it exits 2 naming the file and why")
    func cairndTrustedRootUnusable() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let keygen = try await onThread { try Binaries.run("cairn-server", ["keygen", "--out", folder + "/keys"], in: folder) }
        try #require(keygen.status == 0)
        let base = ["--source", "file:///nowhere", "--data-dir", folder + "/data", "--socket", folder + "/d.sock"]
        try await expectOneLine("cairnd", base + ["--trusted-root", folder + "/none.json"], in: folder, exit: 2,
                                saying: ["cannot read trusted root \(folder)/none.json: No such file or directory"])
        try await expectOneLine("cairnd", base + ["--trusted-root", folder + "/keys/publisher.pub"], in: folder, exit: 2,
                                saying: ["trusted root \(folder)/keys/publisher.pub", "root_malformed"])
        let config = folder + "/cairnd.conf"
        try "trusted_key = \(folder)/keys/publisher.pub\ntrusted_root = \(folder)/none.json\n".write(toFile: config, atomically: true, encoding: .utf8)
        try await expectOneLine("cairnd", base + ["--config", config], in: folder, exit: 2,
                                saying: ["trusted_root and trusted_key are both set"])
    }

    @Test("Given a source that is a bare folder, a relative file:// URL, another scheme or a folder name with a space (flag, config line, CAIRN_SOURCES), when cairnd starts, then it exits 2 with one line saying what to write instead")
    func cairndSourceNotAURL() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let base = ["--data-dir", folder + "/data", "--socket", folder + "/d.sock"]
        try await expectOneLine("cairnd", base + ["--source", "/media/usb/repo"], in: folder, exit: 2,
                                saying: ["source /media/usb/repo is a folder, not a URL", "file:///media/usb/repo"])
        try await expectOneLine("cairnd", base + ["--source", "file://media/usb"], in: folder, exit: 2,
                                saying: ["not an absolute file:// URL", "file:///media/usb/repo"])
        try await expectOneLine("cairnd", base + ["--source", "ftp://mirror.example.org/repo"], in: folder, exit: 2,
                                saying: ["must start with http://, https:// or file://"])
        let config = folder + "/cairnd.conf"
        try "source = https://kb.example.org/repo\nsource = file:///media/USB STICK/repo\n".write(toFile: config, atomically: true, encoding: .utf8)
        try await expectOneLine("cairnd", base + ["--config", config], in: folder, exit: 2,
                                saying: ["config line 2", "holds white space", "file:///media/USB%20STICK/repo"])
        let fromEnvironment = try await onThread {
            try Binaries.run("cairnd", base, in: folder, environment: ["CAIRN_SOURCES": "https://, https://kb.example.org/repo"])
        }
        #expect(fromEnvironment.status == 2 && fromEnvironment.error.contains("source https:// names no host"), "\(fromEnvironment.error)")
    }

    @Test("Given a channel name that is not one (--channel), when cairnd starts, then it exits 2 with one line naming it, before any sync could fail on it")
    func cairndBadChannel() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await expectOneLine("cairnd", ["--channel", "Bad Name!", "--data-dir", folder + "/data", "--socket", folder + "/s"],
                                in: folder, exit: 2, saying: ["\"Bad Name!\" is not a channel name"])
        #expect(!FileManager.default.fileExists(atPath: folder + "/data"))
    }

    @Test("Given an unknown flag, when cairnd starts, then it exits 2 with one line naming the flag")
    func cairndBadFlag() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await expectOneLine("cairnd", ["--no-such-flag"], in: folder, exit: 2, saying: ["--no-such-flag"])
    }

    // MARK: cairn-server serve

    @Test("Given a key file that does not exist (a typo), when cairn-server publish runs, then it exits 74 in one line naming the file, why, and how keys are made, before loading anything")
    func serverMissingKeyFile() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try "[]".write(toFile: folder + "/kb.json", atomically: true, encoding: .utf8)
        try await expectOneLine("cairn-server", ["publish", "--repo", folder + "/repo", "--channel", "c", "--source", folder + "/kb.json",
                                                 "--key", folder + "/keys/publsher.key"], in: folder, exit: 74,
                                saying: ["cannot read the key file \(folder)/keys/publsher.key (No such file or directory)", "cairn-server keygen --out DIR"])
    }

    @Test("Given a missing argument, an unknown flag, a flag out of range or no command, when cairn-server runs, then it exits 64 (EX_USAGE) with one line saying what is wrong")
    func serverUsage() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await expectOneLine("cairn-server", ["publish"], in: folder, exit: 64, saying: ["--repo"])
        try await expectOneLine("cairn-server", ["verify", folder, "--no-such-flag"], in: folder, exit: 64, saying: ["--no-such-flag"])
        try await expectOneLine("cairn-server", [], in: folder, exit: 64, saying: ["no command given", "publish", "serve"])
        // A group of commands given none is no success either (argument-parser prints help, exit 0).
        try await expectOneLine("cairn-server", ["root"], in: folder, exit: 64, saying: ["no command given to root", "rotate", "cairn-server root --help"])
        // A flag out of range is a usage error too (78 is for the config file).
        try await expectOneLine("cairn-server", ["serve", "--repo", folder, "--port", "70000"], in: folder, exit: 64, saying: ["--port", "0-65535"])
        let help = try await onThread { try Binaries.run("cairn-server", ["publish", "--help"], in: folder) }
        #expect(help.status == 0 && help.output.contains("--repo"))
    }

    @Test("Given a port another process listens on, when cairn-server serve starts on it, then it exits 69 naming the port")
    func serverPortTaken() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let listener = try TCPListener()
        defer { listener.close() }
        try await expectOneLine("cairn-server", ["serve", "--repo", folder, "--host", "127.0.0.1", "--port", "\(listener.port)"],
                                in: folder, exit: 69,
                                saying: ["cannot listen on 127.0.0.1:\(listener.port)", "Address already in use", "--port"])
    }

    @Test("Given a repository folder that does not exist, when cairn-server serve starts, then it exits 66 naming it")
    func serverRepositoryMissing() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await expectOneLine("cairn-server", ["serve", "--repo", folder + "/none", "--port", "0"], in: folder, exit: 66,
                                saying: ["\(folder)/none does not exist", "--repo"])
    }

    @Test("Given a config file that is missing, when cairn-server serve starts, then it exits 78 naming the file and why")
    func serverConfigUnreadable() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await expectOneLine("cairn-server", ["serve", "--repo", folder, "--config", folder + "/none.conf"], in: folder,
                                exit: 78, saying: ["cannot read the config file \(folder)/none.conf", "No such file", "--config"])
    }

    @Test("Given a search cache folder that group or others may write, when cairn-server serve starts with online search, then it exits 78 saying so")
    func serverSearchCacheOpen() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let cache = folder + "/cache"
        try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
        #expect(chmod(cache, 0o777) == 0)
        try "online_search = true\nsearch_cache = \(cache)\n".write(toFile: folder + "/server.conf", atomically: true, encoding: .utf8)
        try await expectOneLine("cairn-server", ["serve", "--repo", folder, "--port", "0", "--config", folder + "/server.conf"], in: folder,
                                exit: 78, saying: ["search cache \(cache) is writable by group or others"])
    }

    // MARK: cairn

    @Test("Given no cairnd on the socket path, when cairn asks for status, then it exits 3 naming the socket and what to do")
    func cliNoDaemon() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let socket = folder + "/cairnd.sock"
        try await expectOneLine("cairn", ["--socket", socket, "status"], in: folder, exit: 3,
                                saying: ["cannot reach cairnd at \(socket)", "is cairnd running?", "--socket"])
    }

    @Test("Given an unknown flag, a missing or out-of-range argument, or no command at all, when cairn runs, then it exits 2 with one line saying what is wrong")
    func cliBadFlag() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await expectOneLine("cairn", ["status", "--no-such-flag"], in: folder, exit: 2, saying: ["--no-such-flag"])
        try await expectOneLine("cairn", ["query"], in: folder, exit: 2, saying: ["<words>"])
        try await expectOneLine("cairn", ["query", "water", "-k", "0"], in: folder, exit: 2, saying: ["-k"])
        try await expectOneLine("cairn", [], in: folder, exit: 2, saying: ["no command given", "query", "status"])
        let help = try await onThread { try Binaries.run("cairn", ["--help"], in: folder) }
        #expect(help.status == 0 && help.output.contains("SUBCOMMANDS"))
    }

    @Test("Given no model in the model folder, when cairn embed runs, then it exits 66 with one line saying how to fetch it (not 3, which says cairnd cannot be reached)")
    func cliEmbedWithoutModel() async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await expectOneLine("cairn", ["embed", "--model-dir", folder + "/no-model", "water"], in: folder, exit: 66,
                                saying: [folder + "/no-model", "scripts/fetch-model"])
    }
}
