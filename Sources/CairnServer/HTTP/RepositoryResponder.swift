import CairnHTTP
import CairnSearch
import Hummingbird
import Logging

/// Answers every request: routes by the raw request target (never a decoded or normalised
/// one), serves repository files, `/healthz` and `/metrics`, and records one metric sample and
/// one info log line per request once its body has been sent.
///
/// Everything is static (GET and HEAD of files, read-only) except one route:
/// `POST /v1/channels/<c>/search`, online search, answered by `OnlineSearch` when the
/// configuration enables it and with 404 `search_disabled` otherwise.
struct RepositoryResponder: HTTPResponder {
    typealias Context = BasicRequestContext

    let root: RepositoryRoot
    let documents: DocumentCache
    let fileIO: FileIO
    let metrics: ServerMetrics
    /// Nil unless online search is enabled.
    let search: OnlineSearch?

    func respond(to request: Request, context: Context) async throws -> Response {
        let start = ContinuousClock.now
        let route = RequestPath(target: request.head.path ?? "")
        var response: Response
        if case .search(let channel) = route {
            response = await searchAnswer(request, channel: channel)
        } else {
            response = await answer(request, route: route, context: context)
        }
        let kind = route.kind
        let status = response.status.code
        let logger = context.logger
        let path = request.head.path ?? ""
        let method = request.method
        let observe: @Sendable (Int, Bool) -> Void = { [metrics] bytes, completed in
            let duration = ContinuousClock.now - start
            metrics.record(kind: kind, status: status, bytes: bytes, duration: duration)
            logger.info(completed ? "request" : "request aborted", metadata: [
                "cairn.http.method": "\(method)", "cairn.http.path": "\(path.prefix(512))",
                "cairn.http.kind": "\(kind)", "cairn.http.status": "\(status)", "cairn.http.bytes": "\(bytes)",
                "cairn.http.duration_ms": "\(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)",
            ])
        }
        let length = response.body.contentLength ?? 0
        if length < 64 * 1024 {
            observe(length, true)
            return response
        }
        // Long bodies are observed when fully written, so latency covers the transfer.
        let body = response.body
        response.body = ResponseBody(contentLength: length) { writer in
            do {
                try await body.write(writer)
            } catch {
                observe(0, false)
                throw error
            }
            observe(length, true)
        }
        return response
    }

    /// Online search: the daemon's `POST /v1/search`, on the channel's newest version; with
    /// the CORS headers a browser needs when the page's origin is allowed (`search_allow_origin`).
    private func searchAnswer(_ request: Request, channel: String) async -> Response {
        let allowed = search?.allowedOrigin(request.headers[.origin])
        var response = await searchAnswer(request, channel: channel, preflight: allowed != nil)
        if let allowed {
            response.headers[.accessControlAllowOrigin] = allowed
            if allowed != "*" { response.headers[.vary] = "Origin" }
        }
        return response
    }

    private func searchAnswer(_ request: Request, channel: String, preflight: Bool) async -> Response {
        do throws(APIError) {
            guard let search else {
                throw APIError(404, "search_disabled", "online search is not enabled on this server (online_search = true)")
            }
            // A browser asks before a cross-origin JSON POST; an origin not allowed gets the 405.
            if preflight, request.method == .options {
                return Response(status: .noContent, headers: [
                    .accessControlAllowMethods: "POST", .accessControlAllowHeaders: "Content-Type", .accessControlMaxAge: "600",
                ])
            }
            guard request.method == .post else { throw APIError(405, "method_not_allowed", "use POST on this endpoint", allow: "POST") }
            let body = try await search.endpoint.body(
                contentType: request.headers[.contentType], contentLength: request.headers[.contentLength]
            ) { try await request.bodyBytes(upTo: $0) }
            let answer = try await search.endpoint.search(
                body: body, channel: channel,
                // The server is the source: there is no sync whose state to report.
                flags: { SearchAnswer.Flags() },
                version: { () throws(APIError) -> ServingVersion in try search.version(channel: channel) })
            return Responses.json(.ok, bytes: answer)
        } catch {
            var response = Responses.json(HTTPResponse.Status(code: error.status), bytes: error.body)
            if let allow = error.allow { response.headers[.allow] = allow }
            return response
        }
    }

    private func answer(_ request: Request, route: RequestPath, context: Context) async -> Response {
        guard request.method == .get || request.method == .head else {
            var response = Responses.error(.methodNotAllowed)
            response.headers[.allow] = "GET, HEAD"
            return response
        }
        let response: Response
        switch route {
        case .malformed:
            return Responses.error(.badRequest)
        case .notFound, .search:
            return Responses.error(.notFound)
        case .health:
            response = Responses.json(.ok, "{\"status\":\"ok\"}")
        case .metrics:
            response = Response(status: .ok,
                                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                                body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.exposition())))
        case .file(let file):
            guard let resolved = root.resolve(file.relativePath) else {
                // A 404 tells a device the file is not held here (a root: the chain ends); a
                // folder this server may not search is the server's fault, said as one.
                guard let code = root.lookupFailure(file.relativePath) else { return Responses.error(.notFound) }
                return FileResponse.unreadableAnswer("a repository folder cannot be searched", path: file.relativePath, errno: code,
                                                     context: context)
            }
            let builder = FileResponse(file: file, resolved: resolved, documents: documents, fileIO: fileIO)
            do {
                return try await builder.response(to: request, context: context)
            } catch {
                // The file vanished between stat and open: as if it had never been there.
                return Responses.error(.notFound)
            }
        }
        if request.method == .head {
            var head = Response(status: response.status, headers: response.headers)
            head.headers[.contentLength] = String(response.body.contentLength ?? 0)
            return head
        }
        return response
    }
}
