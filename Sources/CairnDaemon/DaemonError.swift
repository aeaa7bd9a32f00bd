import CairnIndex

/// The one error type of CairnDaemon: an opaque code, a one-line message that says what happened
/// and what to do, and an optional cause. Messages never contain query or document text.
public struct DaemonError: Error, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        public var description: String { name }

        /// A configuration file, flag or environment value is malformed.
        public static let badConfiguration = Code(name: "bad_configuration")
        /// Another live process answers on the socket path, or the path is not a socket.
        public static let socketInUse = Code(name: "socket_in_use")
        /// Another cairnd holds the data directory's lock.
        public static let dataDirectoryLocked = Code(name: "data_dir_locked")
        /// The data directory cannot be created or written (missing parent, permissions, a
        /// file in its place).
        public static let dataDirectoryUnusable = Code(name: "data_dir_unusable")
        /// The socket could not be prepared or bound (its folder missing or closed, group, path too
        /// long).
        public static let socketSetup = Code(name: "socket_setup")
        /// No version is installed in the data directory.
        public static let noIndex = Code(name: "no_index")
        /// The installed version cannot be opened (missing file, wrong version, bad meta).
        public static let versionUnusable = Code(name: "version_unusable")
    }

    public let code: Code
    public let message: String
    public let cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = String(message.map { $0.isNewline ? " " : $0 })
        self.cause = cause
    }

    /// Whether trying again later can succeed.
    public var isRetryable: Bool { code == .noIndex }

    /// Whether a version failed to open for a reason outside its bytes (a full disk;
    /// `IndexError.isEnvironmental`): it is kept, not discarded.
    public var isEnvironmental: Bool { (cause as? IndexError)?.isEnvironmental ?? false }

    public var description: String { "\(code): \(message)" }
}
