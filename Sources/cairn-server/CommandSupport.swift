import ArgumentParser
import CairnCore
import CairnPublish
import CairnCommandLine
import Foundation
import Logging

/// Writes one line to standard error, prefixed with the program's name.
func printError(_ line: String) {
    writeStandardError("cairn-server: \(line)\n")
}

/// The exit status for a publish error (sysexits.h where one fits).
func exitCode(for error: PublishError) -> ExitCode {
    switch error.code {
    case .badInput: ExitCode(65)          // EX_DATAERR
    case .invalidArgument: ExitCode(64)   // EX_USAGE
    case .locked: ExitCode(75)            // EX_TEMPFAIL
    case .canaryFailed: ExitCode(1)
    case .model: ExitCode(3)
    case .thresholdNotMet: ExitCode(77)   // EX_NOPERM
    default: ExitCode(74)                 // EX_IOERR
    }
}

/// Prints the error as one line and ends the command with its exit status.
func fail(_ error: PublishError) -> ExitCode {
    printError(error.message)
    return exitCode(for: error)
}

/// Logs to standard error: warnings and above, or everything from info with `verbose`.
func bootstrapLogging(verbose: Bool) -> Logger {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = verbose ? .info : .warning
        return handler
    }
    return Logger(label: "cairn-server")
}

/// The trusted keys: the files given, else those under `<repo>/keys/` (saying so).
func trustedKeys(files: [String], repository: Repository, announce: (String) -> Void = { print($0) }) throws -> [PublicKey] {
    if !files.isEmpty {
        do throws(PublishError) { return try loadPublic(files) } catch { throw fail(error) }
    }
    let stored = repository.storedKeys()
    announce("no --trusted-key given: trusting the \(stored.count) key(s) stored under \(repository.keysFolder)/ "
          + "(this checks integrity, not who published; pin a key with --trusted-key)")
    return stored
}

/// The private keys in the files at `paths`, in order.
func loadPrivate(_ paths: [String]) throws(PublishError) -> [PublisherKey] {
    var keys: [PublisherKey] = []
    for path in paths { keys.append(try KeyFiles.loadPrivate(path)) }
    return keys
}

/// The public keys in the files at `paths`, in order.
func loadPublic(_ paths: [String]) throws(PublishError) -> [PublicKey] {
    var keys: [PublicKey] = []
    for path in paths { keys.append(try KeyFiles.loadPublic(path)) }
    return keys
}
