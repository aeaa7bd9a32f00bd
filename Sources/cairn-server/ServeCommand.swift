import ArgumentParser
import CairnCore
import CairnServer
import CairnStore
import CairnCommandLine
import Foundation
import Logging

/// `cairn-server serve`: serves a repository folder read-only over HTTP until SIGTERM/SIGINT.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serves a repository folder read-only over HTTP.",
        discussion: """
            Settings come from the defaults, then --config FILE (key = value lines), then the \
            environment (CAIRN_SERVER_HOST, CAIRN_SERVER_PORT, CAIRN_SERVER_REPO, \
            CAIRN_SERVER_LOG_LEVEL, CAIRN_SERVER_ONLINE_SEARCH, CAIRN_SERVER_SEARCH_CACHE, \
            CAIRN_SERVER_SEARCH_TRUSTED_KEY, CAIRN_SERVER_SEARCH_TRUSTED_ROOT, \
            CAIRN_SERVER_SEARCH_ALLOW_ORIGIN), then these flags. Port 0 picks a free port; the bound \
            one is printed on start. Refuses to start if the folder contains a private signing key. \
            With online_search = true it also answers POST /v1/channels/<c>/search.
            """
    )

    @Option(help: "The repository folder to serve.")
    var repo: String?

    @Option(help: "TCP port (0 picks a free one).")
    var port: Int?

    @Option(help: "Address to listen on.")
    var host: String?

    @Option(help: "A config file of `key = value` lines.")
    var config: String?

    func validate() throws {
        // A bad flag is a usage error (64), as `--port abc` is; 78 is for the config file.
        if let port, !(0...65535).contains(port) { throw ValidationError("--port must be 0-65535") }
    }

    func run() async throws {
        // Online search maps rows files: a failed read of one names the file before the process stops.
        MappedFiles.nameFailedReads(program: "cairn-server")
        var configuration: ServerConfiguration
        do {
            configuration = try settings()
        } catch {
            writeStandardError("cairn-server: \(error.message)\n")
            throw ExitCode(78)  // EX_CONFIG
        }
        let level = configuration.logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "cairn-server")
        // A download holds two descriptors (its connection and the blob's file).
        DescriptorLimit.fit(&configuration.maxConnections, descriptorsEach: 2) { logger.warning("\($0)") }
        let repository = configuration.repository
        let host = configuration.host
        do {
            try await runServer(configuration: configuration, logger: logger) { port in
                // Written straight to the file descriptor: scripts wait for this line.
                writeStandardOutput("cairn-server: serving \(repository) on http://\(host):\(port)\n")
            }
        } catch let error as ServerError {
            writeStandardError("cairn-server: \(error.message)\n")
            throw ExitCode(Self.exitCode(for: error.code))
        } catch {
            writeStandardError("cairn-server: stopped: \(error)\n")
            throw ExitCode(70)  // EX_SOFTWARE
        }
    }

    /// sysexits.h codes (docs/exit-codes.md).
    static func exitCode(for code: ServerError.Code) -> Int32 {
        switch code {
        case .privateKeyUnderRoot: 77  // EX_NOPERM
        case .listenFailed: 69         // EX_UNAVAILABLE
        case .configurationInvalid: 78 // EX_CONFIG
        default: 66                    // EX_NOINPUT
        }
    }

    /// Defaults, then the config file, then the environment, then flags.
    private func settings() throws(ServerError) -> ServerConfiguration {
        var configuration = ServerConfiguration()
        if let config {
            let text: String
            do { text = try FileSystem.readText(config) } catch {
                throw ServerError(.configurationInvalid, "cannot read the config file \(config) (\(error.reason)); fix it or pass another --config")
            }
            do { try configuration.apply(configFile: text) } catch {
                throw ServerError(.configurationInvalid, "\(config): \(error.message)")
            }
        }
        try configuration.apply(environment: ProcessInfo.processInfo.environment)
        if let repo { configuration.repository = repo }
        if let host { configuration.host = host }
        if let port {
            guard (0...65535).contains(port) else { throw ServerError(.configurationInvalid, "--port must be 0-65535") }
            configuration.port = port
        }
        try configuration.check()
        return configuration
    }
}
