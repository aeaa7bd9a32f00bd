/// The one error type of CairnClient: an opaque code and a one-line message that says what
/// happened (never query or document text).
public struct ClientError: Error, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        public var description: String { name }

        /// The socket cannot be reached: nothing listens, the path is missing, its queue is
        /// full, or the connection was closed unanswered.
        public static let unreachable = Code(name: "unreachable")
        /// cairnd took the request but did not answer within the timeout (it may still act on it).
        public static let noAnswer = Code(name: "no_answer")
        /// The peer broke the HTTP/1.1 exchange.
        public static let protocolViolation = Code(name: "protocol_violation")
    }

    public let code: Code
    public let message: String
    public let cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = String(message.map { $0.isNewline ? " " : $0 })
        self.cause = cause
    }

    public var description: String { "\(code): \(message)" }
}
