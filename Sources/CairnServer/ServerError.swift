/// The one error type of CairnServer: an opaque code, a message that says what happened and what
/// to do, and an optional underlying cause. Messages never contain file contents.
public struct ServerError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, stable across releases.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// A configuration file, environment variable or flag has a bad key or value.
        public static let configurationInvalid = Code("configuration_invalid")
        /// The repository folder is missing, unreadable or not a folder.
        public static let repositoryInvalid = Code("repository_invalid")
        /// A private signing key lies under the served folder: the server refuses to start.
        public static let privateKeyUnderRoot = Code("private_key_under_root")
        /// The server cannot listen on its address (the port is taken, the address is not
        /// this machine's, a privileged port without the right).
        public static let listenFailed = Code("listen_failed")
        /// Online search cannot load a channel's newest version (bad signature, missing or
        /// corrupt blob, failed verification, cache folder unusable); the last good one serves.
        public static let versionUnusable = Code("version_unusable")
    }

    public let code: Code
    public let message: String
    public let cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String {
        cause.map { "\(message) (\(code): \($0))" } ?? "\(message) (\(code))"
    }
}
