import Foundation

/// The one error type of CairnStore: an opaque code, a one-line message saying what happened
/// (never file contents), and whether trying again may help.
public struct StoreError: Error, CustomStringConvertible, Sendable, Equatable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        public var description: String { name }

        public static let io = Code(name: "io")
        public static let diskFull = Code(name: "disk_full")
        public static let readOnly = Code(name: "read_only")
        public static let notFound = Code(name: "not_found")
        public static let corruptStream = Code(name: "corrupt_stream")
        public static let sizeLimitExceeded = Code(name: "size_limit_exceeded")
        public static let hashMismatch = Code(name: "hash_mismatch")
    }

    public let code: Code
    public let message: String
    /// errno, where the failure came from a system call.
    public let errno: Int32?

    public init(_ code: Code, _ message: String, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
    }

    public var description: String { message }

    /// Why, in a few words: the system's reason where a system call failed, else the message.
    public var reason: String { errno.map { String(cString: strerror($0)) } ?? message }

    /// Full disk and I/O errors may pass; corrupt or oversized data will not.
    public var isRetryable: Bool { code == .io || code == .diskFull || code == .readOnly }
}
