import CairnSearch
import Hummingbird
import Logging

/// Turns every failure into the API's JSON error shape: unknown routes into 404 `not_found`,
/// a known path with the wrong method into 405 `method_not_allowed` (with `Allow`), anything
/// unexpected into 500 `internal` (logged with detail, never sent).
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = DaemonRequestContext
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return DaemonAPI.response(for: error)
        } catch let error as HTTPError where error.status == .notFound {
            return DaemonAPI.response(for: Self.routeMiss(request))
        } catch let error as any HTTPResponseError where error.status.code < 500 {
            let code = error.status == .contentTooLarge ? "body_too_large" : "bad_request"
            return DaemonAPI.response(for: APIError(error.status.code, code, "the request was refused (\(error.status.code))"))
        } catch {
            logger.error("request failed", metadata: ["cairn.error": "\(error)", "cairn.http.path": "\(request.uri.path)"])
            return DaemonAPI.response(for: .internalError)
        }
    }

    static func routeMiss(_ request: Request) -> APIError {
        let segments = request.uri.path.split(separator: "/").map(String.init)
        let matching = DaemonAPI.routes.first { route in
            route.path.count == segments.count && zip(route.path, segments).allSatisfy { $0 == "*" || $0 == $1 }
        }
        guard let matching else { return APIError(404, "not_found", "no such endpoint; see protocol/socket-api.md") }
        let allowed = matching.methods.map(\.rawValue).joined(separator: ", ")
        return APIError(405, "method_not_allowed", "use \(allowed) on this endpoint", allow: allowed)
    }
}
