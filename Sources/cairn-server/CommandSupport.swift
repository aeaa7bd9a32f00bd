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
    case .thresholdNotMet, .keyExposed: ExitCode(77)   // EX_NOPERM
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
        // Trusted, not counted toward a threshold: a key named twice (keys/*.pub and a pinned
        // copy) is trusted once.
        do throws(PublishError) { return try loadPublic(files, keepingOnce: true) } catch { throw fail(error) }
    }
    let stored = repository.storedKeys()
    announce("no --trusted-key given: trusting the \(stored.count) key(s) stored under \(repository.keysFolder)/ "
          + "(this checks integrity, not who published; pin a key with --trusted-key)")
    return stored
}

/// The private keys in the files at `paths`, in order.
/// - Parameter repository: the repository the keys sign for: a key inside it is refused
///   (`key_exposed`, 77), since its files are carried to web servers, buckets and sticks (serve
///   refuses such a folder; `aws s3 sync` would copy it). A key others may read is said once.
func loadPrivate(_ paths: [String], outside repository: String? = nil) throws(PublishError) -> [PublisherKey] {
    var keys: [PublisherKey] = []
    let folder = repository.flatMap { realpath($0, nil) }.map { pointer in
        defer { free(pointer) }
        return String(cString: pointer)
    }
    for path in paths {
        if let folder, let real = realpath(path, nil) {
            defer { free(real) }
            if String(cString: real).hasPrefix(folder + "/") {
                throw PublishError(.keyExposed, "the private key \(path) is inside the repository \(repository ?? folder), whose files are copied to servers and sticks; move it out (and make a new key if the folder was ever served)")
            }
        }
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & 0o077 != 0 {
            printError("warning: the private key \(path) may be read by others (mode \(String(info.st_mode & 0o777, radix: 8))); chmod 600 it")
        }
        let key = try KeyFiles.loadPrivate(path)
        try refuseRepeated(key.keyID, in: path, loaded: keys.map(\.keyID), from: paths)
        keys.append(key)
    }
    return keys
}

/// The public keys in the files at `paths`, in order; two that hold the same key are refused
/// (`refuseRepeated`: keys that sign or count toward a threshold), or with `keepingOnce` (keys
/// only trusted) the key is kept once.
func loadPublic(_ paths: [String], keepingOnce: Bool = false) throws(PublishError) -> [PublicKey] {
    var keys: [PublicKey] = []
    for path in paths {
        let key = try KeyFiles.loadPublic(path)
        if keepingOnce, keys.contains(key) { continue }
        try refuseRepeated(key.keyID, in: path, loaded: keys.map(\.keyID), from: paths)
        keys.append(key)
    }
    return keys
}

/// Refuses key `id` from `path` when one of the keys `loaded` from the first of `paths` is the
/// same: a key signs, and counts toward a threshold, once (a publish counted it once and said
/// "1 were given"; root init, rotate and their public keys said a JSON field was out of range).
private func refuseRepeated(_ id: KeyID, in path: String, loaded: [KeyID], from paths: [String]) throws(PublishError) {
    guard let earlier = loaded.firstIndex(of: id) else { return }
    throw PublishError(.invalidArgument, "\(paths[earlier]) and \(path) hold the same key \(id); a key counts once toward a threshold: give each key once")
}

/// Makes what this command writes into `repository` as readable as the repository's own folder
/// (before the first publish, the nearest folder on its way that exists): a repository others may read (0755) gets
/// files 0644 and folders 0755 whatever the umask, where root's cron (077) made every new blob
/// 0600 and folder 0700, and a web server of another user answered 403; a private one (0700)
/// keeps the umask's modes. Only read and search bits are unmasked, and only those the folder
/// grants; a private key is written 0600 whatever the umask.
func followRepositoryReadability(_ repository: String) {
    var info = stat()
    var folder = repository.isEmpty ? "." : repository
    // Before the first publish: the nearest folder that exists on the way.
    while stat(folder, &info) != 0 {
        let parent = (folder as NSString).deletingLastPathComponent
        guard parent != folder else { return }
        folder = parent.isEmpty ? "." : parent
    }
    let granted = mode_t(info.st_mode) & 0o055
    umask(umask(0) & ~granted)
}
