/// The one error type of CairnCore: an opaque, stable `code`, a one-line `message` that says
/// what is wrong (and, where useful, what to do), and an optional underlying `cause`.
///
/// Messages name fields, offsets and limits, never document or query text.
public struct CoreError: Error, Sendable, CustomStringConvertible {
    /// A stable, machine-readable error code; compare codes, not messages.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable snake_case name, e.g. `manifest_malformed`.
        public let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// Bytes that are not acceptable JSON (syntax, floats, duplicate keys, limits).
        public static let jsonMalformed = Code("json_malformed")
        /// A manifest (or its signed envelope) is missing a field, has an ill-typed or
        /// out-of-range value, or carries an unknown field.
        public static let manifestMalformed = Code("manifest_malformed")
        /// The manifest's `format_version` is not one this build reads.
        public static let unsupportedFormat = Code("unsupported_format")
        /// A signature by a trusted key does not verify over the manifest.
        public static let signatureInvalid = Code("signature_invalid")
        /// No signature was made by any of the trusted keys.
        public static let untrustedKey = Code("untrusted_key")
        /// A delta blob is truncated, inconsistent or otherwise not decodable.
        public static let deltaMalformed = Code("delta_malformed")
        /// A key file's text or a key's bytes are not acceptable.
        public static let keyMalformed = Code("key_malformed")
        /// A canaries file is not acceptable.
        public static let canaryMalformed = Code("canary_malformed")
        /// Records do not hash to the state root they were supposed to have.
        public static let stateRootMismatch = Code("state_root_mismatch")
        /// Root metadata (or its signed envelope) is missing a field, has an ill-typed or
        /// out-of-range value, or carries an unknown field (protocol/root.md).
        public static let rootMalformed = Code("root_malformed")
        /// A root does not chain from the trusted one: thresholds not met, wrong version, or
        /// older than the trusted root (rollback of trust).
        public static let rootRefused = Code("root_refused")
        /// Fewer distinct signing keys of the trusted root signed the manifest than its threshold.
        public static let thresholdNotMet = Code("threshold_not_met")
        /// The manifest is signed only by keys a root rotation removed.
        public static let keyRevoked = Code("key_revoked")
        /// A caller passed values that break a documented precondition.
        public static let invalidArgument = Code("invalid_argument")
    }

    public let code: Code
    /// One line: what is wrong and, where useful, what to do about it.
    public let message: String
    /// The underlying error, if any.
    public let cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    /// Whether trying the same operation again could succeed. Every CairnCore error is about
    /// the bytes or values given, so none is.
    public var isRetryable: Bool { false }

    public var description: String {
        guard let cause else { return "\(code): \(message)" }
        return "\(code): \(message) (cause: \(cause))"
    }
}
