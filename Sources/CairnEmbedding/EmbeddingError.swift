/// The one error type of CairnEmbedding: an opaque code, a message that says what happened and
/// what to do, never any document or query text.
public struct EmbeddingError: Error, CustomStringConvertible, Sendable, Equatable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        public var description: String { name }

        public static let blasUnavailable = Code(name: "blas_unavailable")
        public static let modelNotFound = Code(name: "model_not_found")
        public static let safetensorsTruncated = Code(name: "safetensors_truncated")
        public static let safetensorsMalformed = Code(name: "safetensors_malformed")
        public static let tensorMissing = Code(name: "tensor_missing")
        public static let tensorMismatch = Code(name: "tensor_mismatch")
        public static let vocabularyMalformed = Code(name: "vocabulary_malformed")
        public static let configMalformed = Code(name: "config_malformed")
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
