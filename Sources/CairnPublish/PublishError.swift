import CairnStore
import Foundation

/// The one error type of CairnPublish: an opaque, stable `code`, a one-line `message` that says
/// what is wrong and where (file, record, field), and an optional `cause`.
///
/// Messages name files, record positions, ids and fields, never document or query text.
public struct PublishError: Error, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable snake_case name, e.g. `bad_input`.
        public let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The source files are not acceptable (syntax, duplicate id, missing field, bad UTF-8).
        public static let badInput = Code("bad_input")
        /// Another publish holds the repository's lock.
        public static let locked = Code("locked")
        /// The new version's own index fails one of its canary queries.
        public static let canaryFailed = Code("canary_failed")
        /// The repository's existing files are not what their manifests say.
        public static let repositoryCorrupt = Code("repository_corrupt")
        /// The model folder cannot be read or loaded.
        public static let model = Code("model")
        /// A file could not be read or written.
        public static let io = Code("io")
        /// The publish's scratch folder (under TMPDIR) cannot take what it must hold: full,
        /// read-only, failing. Exit 74, as `io`.
        public static let scratchUnusable = Code("scratch_unusable")
        /// Fewer signatures than the root's threshold (a manifest or a root rotation); nothing
        /// was released or written.
        public static let thresholdNotMet = Code("threshold_not_met")
        /// A private signing key lies inside the repository it would sign for, whose files are
        /// copied to web servers, buckets and sticks.
        public static let keyExposed = Code("key_exposed")
        /// The caller passed an unusable option (channel name, key file, counts).
        public static let invalidArgument = Code("invalid_argument")
    }

    public let code: Code
    /// One line: what is wrong and where.
    public let message: String
    public let cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = String(message.map { $0.isNewline ? " " : $0 })
        self.cause = cause
    }

    /// Only a held lock or an I/O failure may pass by trying again.
    public var isRetryable: Bool { code == .locked || code == .io }

    public var description: String { "\(code): \(message)" }

    /// A version or root file that must be new could not be created: `locked` when another
    /// publish created it meanwhile (the lock does not hold across the hosts sharing this file
    /// system), else `io`.
    static func creating(_ path: String, _ error: StoreError) -> PublishError {
        guard error.errno == EEXIST else { return PublishError(.io, "cannot write \(path): \(error.message)", cause: error) }
        return PublishError(.locked, "\(path) was created by another publish at the same time, which the publish lock did not stop (a network file system whose locks are per host?); nothing was overwritten; publish from one host at a time", cause: error)
    }

    /// A file that could not be opened or read, with the system's reason (`code`, default `errno`).
    static func reading(_ path: String, _ code: Int32 = errno) -> PublishError {
        PublishError(.io, "cannot read \(path): \(String(cString: strerror(code)))")
    }

    /// Bad input in `file` at `record` (e.g. `line 3`, `index 2`, `id "x"`).
    static func badInput(_ file: String, _ record: String?, _ what: String) -> PublishError {
        PublishError(.badInput, record.map { "\(file): \($0): \(what)" } ?? "\(file): \(what)")
    }
}
