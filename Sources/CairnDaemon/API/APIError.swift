import Foundation
import Hummingbird

/// An error answer of the socket API: an HTTP status and `{"code", "message"}` with a stable
/// code (protocol/socket-api.md lists them). Messages never contain query or document text.
struct APIError: Error, HTTPResponseError, Sendable {
    let status: HTTPResponse.Status
    let code: String
    let message: String
    var headers: HTTPFields = [:]

    init(_ status: HTTPResponse.Status, _ code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var fields = headers
        fields[.contentType] = "application/json; charset=utf-8"
        let body = (try? JSONEncoder().encode(["code": code, "message": message])) ?? Data("{}".utf8)
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    static func badJSON(_ message: String = "the body is not a valid JSON object") -> APIError {
        APIError(.badRequest, "bad_json", message)
    }
    static let noIndex = APIError(.serviceUnavailable, "no_index",
                                  "no knowledge-base version is installed yet; wait for the first sync")
    static let busy = APIError(.serviceUnavailable, "busy", "too many searches are waiting; retry in a moment")
    static let internalError = APIError(.internalServerError, "internal", "the search failed inside cairnd; see its log")
}
