import Foundation

/// The one error type of CairnSearch, and the error answer of both HTTP+JSON APIs that search
/// (cairnd's socket API and cairn-server's online search): an HTTP status and
/// `{"code", "message"}` with a stable code (protocol/socket-api.md lists them). Messages never
/// contain query or document text. The HTTP layers turn it into a response with `body`.
public struct APIError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The HTTP status code.
    public let status: Int
    public let code: String
    public let message: String
    /// The `Allow` header of a 405 answer.
    public var allow: String?

    public init(_ status: Int, _ code: String, _ message: String, allow: String? = nil) {
        self.status = status
        self.code = code
        self.message = String(message.map { $0.isNewline ? " " : $0 })
        self.allow = allow
    }

    /// `{"code": …, "message": …}` as UTF-8 JSON.
    public var body: [UInt8] { APIJSON.encode(["code": code, "message": message]) }

    public var description: String { "\(status) \(code): \(message)" }

    public static func badJSON(_ message: String = "the body is not a valid JSON object") -> APIError {
        APIError(400, "bad_json", message)
    }
    /// A body that names a key twice within one object: which one counts would be the
    /// decoder's choice, so neither does (the key is not echoed: it is client text).
    public static var repeatedKey: APIError { badJSON("the body names a key twice within one object") }
    public static func bodyTooLarge(limit: Int) -> APIError {
        APIError(413, "body_too_large", "the request body is larger than \(limit) bytes")
    }
    /// A body the connection broke off before its end (the client hung up, or a chunk was
    /// malformed): not a body that was too large.
    public static let bodyBrokenOff = APIError(400, "bad_request", "the request body broke off before its end")
    public static let badContentType = APIError(
        415, "bad_content_type", "send the body as application/json (application/x-www-form-urlencoded is read as JSON too)")
    public static let noIndex = APIError(503, "no_index", "no knowledge-base version is installed yet; wait for the first sync")
    public static let busy = APIError(503, "busy", "too many searches are waiting; retry in a moment")
    public static let internalError = APIError(500, "internal", "the search failed inside the server; see its log")
}

/// The JSON both APIs write: sorted keys, slashes unescaped.
public enum APIJSON {
    public static let contentType = "application/json; charset=utf-8"

    /// `value`'s JSON, for a value of strings alone (an error's body): encoding cannot fail.
    public static func encode(_ value: some Encodable) -> [UInt8] {
        (try? encoder.encode(value)).map(Array.init) ?? Array("{}".utf8)
    }

    /// An answer's JSON, or `internalError` when it cannot be encoded (a NaN or infinite number,
    /// which JSON cannot hold): a 500 the caller can tell, not a 200 `{}` without its fields.
    public static func encode(answer value: some Encodable) throws(APIError) -> [UInt8] {
        do { return Array(try encoder.encode(value)) } catch { throw APIError.internalError }
    }

    private static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
