import ArgumentParser
import CairnBLAS
import CairnCore
import CairnDaemon
import CairnCommandLine
import Foundation
import Logging
import ServiceLifecycle
import UnixSignals

@main
struct Cairnd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cairnd",
        abstract: "The Cairn device daemon: keeps a local index fresh and answers queries over a Unix socket.",
        discussion: """
            Settings come from the config file (--config, else /etc/cairn/cairnd.conf when it \
            exists; see client-config/cairnd.conf for every key), then the environment \
            (CAIRN_SOCKET, CAIRN_DATA_DIR, CAIRN_CHANNEL, CAIRN_SOURCES comma-separated), then \
            these flags. The socket API is described in protocol/socket-api.md. SIGTERM or \
            SIGINT: in-flight queries finish, the socket file is removed, exit 0.

            With sources and a trusted key or root, cairnd polls the sources (SIGHUP or `cairn sync`: \
            now), verifies and installs new versions beside the live one and swaps them in; \
            without sources it serves what is installed.

            Exit status (docs/exit-codes.md): 0 after a graceful shutdown; 1 when the data \
            directory or the socket cannot be used (held by another cairnd, folder missing or \
            not writable, cannot listen); 2 for a bad flag, config file or trusted key. Each \
            failure prints one line saying what failed, where, and what to do.
            """,
        version: "cairnd " + CairnVersion.summary
    )

    /// argument-parser's entry point, except that usage errors exit 2 (not 64), as the
    /// documented exit codes promise, and a start-up failure is one line of its own.
    static func main() async {
        BLAS.prepareEnvironment()
        // A failed read of a mapped rows file names the file before the process stops.
        MappedFiles.nameFailedReads(program: "cairnd")
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as DaemonError {
            writeStandardError("cairnd: \(SourceURL.redactingPasswords(in: error.message))\n")
            Foundation.exit(error.code == .badConfiguration ? 2 : 1)
        } catch {
            if exitCode(for: error) == .validationFailure {
                writeStandardError("cairnd: \(SourceURL.redactingPasswords(in: message(for: error)))\n")
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }

    @Option(help: "Configuration file (key = value lines; see client-config/cairnd.conf).")
    var config: String?
    @Option(help: "Base URL of a repository copy (http(s)://, file://). Repeatable; tried in order.")
    var source: [String] = []
    @Option(help: "Channel to follow.")
    var channel: String?
    @Option(name: .customLong("trusted-key"), help: "Publisher public key file to pin. Repeatable.")
    var trustedKey: [String] = []
    @Option(name: .customLong("trusted-root"), help: "Root file to pin (root/<n>.root.json); the device then follows the repository's key rotations. Instead of --trusted-key.")
    var trustedRoot: String?
    @Option(name: .customLong("data-dir"), help: "Where installed versions and state live.")
    var dataDir: String?
    @Option(help: "Unix socket path for the query API.")
    var socket: String?
    @Option(name: .customLong("poll-interval"), help: "Seconds between polls.")
    var pollInterval: Double?

    func run() async throws {
        var configuration = try resolvedConfiguration()
        let level = configuration.logLevel
        LoggingSystem.bootstrap { label in
            var handler = RedactingLogHandler(wrapped: StreamLogHandler.standardError(label: label))
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "cairnd")
        for ignored in configuration.ignoredKeys {
            logger.warning("\(ignored) is not a setting this cairnd knows (one of a newer cairnd?); skipped", metadata: ["cairn.version": "\(CairnVersion.date)"])
        }
        // A search connection holds its socket alone (the index's connections are in the reserve).
        DescriptorLimit.fit(&configuration.maxConnections, descriptorsEach: 1) { logger.warning("\($0)") }
        // A file-size limit (ulimit -f) must fail the write with EFBIG, which the sync reports
        // as disk_full, instead of killing cairnd with SIGXFSZ.
        signal(SIGXFSZ, SIG_IGN)
        // SIGHUP: sync now (the socket's POST /v1/sync does the same). Ignored from here: during
        // start-up (seconds on a large version) its default action would end cairnd.
        signal(SIGHUP, SIG_IGN)
        let device = try Device.build(configuration: configuration, logger: logger)
        let hangup = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        hangup.setEventHandler { _ = device.requestSync?() }
        hangup.resume()
        defer { hangup.cancel() }
        let stops = StopSignals.watch(deadline: configuration.stopTimeout)
        defer { stops.forEach { $0.cancel() } }
        let group = ServiceGroup(configuration: .init(services: device.services, gracefulShutdownSignals: [.sigterm, .sigint],
                                                      logger: logger))
        do {
            try await group.run()
        } catch let error as DaemonError {
            throw error
        } catch {
            writeStandardError("cairnd: stopped: \(SourceURL.redactingPasswords(in: "\(error)"))\n")
            throw ExitCode(1)
        }
    }

    /// File, then environment, then flags.
    func resolvedConfiguration() throws -> DaemonConfiguration {
        var configuration = DaemonConfiguration()
        if let path = config ?? existingDefaultFile() { try configuration.apply(file: path) }
        configuration.apply(environment: ProcessInfo.processInfo.environment)
        if !source.isEmpty { configuration.replaceSources(with: source) }
        // Sources from the flags or CAIRN_SOURCES (the file's lines are checked as they are read).
        if let problem = configuration.sources.lazy.compactMap(SourceURL.problem).first {
            throw DaemonError(.badConfiguration, problem)
        }
        if !trustedKey.isEmpty {
            configuration.trustedKeys = trustedKey
            if trustedRoot == nil { configuration.trustedRoot = nil }
        }
        if let trustedRoot {
            configuration.trustedRoot = trustedRoot
            if trustedKey.isEmpty { configuration.trustedKeys = [] }
        }
        if let channel { configuration.channel = channel }
        if let dataDir { configuration.dataDirectory = dataDir }
        if let socket { configuration.socketPath = socket }
        if let pollInterval {
            guard DaemonConfiguration.secondsInRange(pollInterval) else {
                throw DaemonError(.badConfiguration, "--poll-interval must be a number of seconds from 0.001 to 1000000000")
            }
            configuration.pollInterval = pollInterval
        }
        return configuration
    }

    func existingDefaultFile() -> String? {
        let path = DaemonConfiguration.defaultConfigurationFile
        return FileManager.default.fileExists(atPath: path) ? path : nil
    }
}
