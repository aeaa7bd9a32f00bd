import CairnCore
import CairnIndex
import Foundation
import Hummingbird
import Logging

/// The socket API's handlers (protocol/socket-api.md): stateless apart from the shared
/// `IndexHolder`, status provider and search limiter.
struct DaemonAPI: Sendable {
    let holder: IndexHolder
    let status: any SyncStatusProvider
    let requestSync: (@Sendable () async -> Void)?
    let limiter: QueryLimiter
    let dataDirectory: String
    let maxBodyBytes: Int
    let logger: Logger

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.add(middleware: ErrorMiddleware(logger: logger))
        router.get("healthz") { _, _ in try Self.json(["ok": true]) }
        router.get("v1/status") { _, _ in try await statusAnswer() }
        router.post("v1/search") { request, _ in try await search(request) }
        router.get("v1/chunks/:id") { _, context in try chunk(context.parameters.require("id")) }
        router.post("v1/sync") { _, _ in try await sync() }
    }

    /// The allowed methods of each route, for 405 answers (`*` matches one path segment).
    static let routes: [(path: [String], methods: [HTTPRequest.Method])] = [
        (["healthz"], [.get]), (["v1", "status"], [.get]), (["v1", "search"], [.post]),
        (["v1", "chunks", "*"], [.get]), (["v1", "sync"], [.post]),
    ]

    // MARK: Handlers

    func search(_ request: Request) async throws -> Response {
        try Self.checkContentType(request)
        let body = try await readBody(request)
        let searchRequest = try SearchBody.parse(body)
        let answer = try await limiter.withSlot { () async throws -> SearchAnswer in
            // The version is taken once: every result of this query comes from it, even if a
            // new version is installed meanwhile.
            guard let serving = holder.current else { throw APIError.noIndex }
            let sync = await status.syncStatus()
            return try run(searchRequest, on: serving, sync: sync)
        }
        return try Self.json(answer)
    }

    func run(_ request: SearchRequest, on serving: ServingVersion, sync: SyncStatus) throws -> SearchAnswer {
        let clock = ContinuousClock()
        let start = clock.now
        var embedTime = Duration.zero
        do {
            // The lexical part runs beside the query's embedding (SearchIndex.search(_:embed:)).
            let response = try serving.index.search(request) { () -> [Float]? in
                guard let embedder = serving.embedder else { return nil }
                let embedStart = clock.now
                defer { embedTime = clock.now - embedStart }
                return embedder.embed(request.query)
            }
            return SearchAnswer(response, denseAvailable: serving.denseAvailable, sync: sync, embedMilliseconds: Self.milliseconds(embedTime),
                                totalMilliseconds: Self.milliseconds(clock.now - start))
        } catch {
            logger.error("search failed", metadata: ["cairn.snapshot.version": "\(serving.version)", "cairn.error": "\(error)"])
            throw APIError.internalError
        }
    }

    func chunk(_ rawID: String) throws -> Response {
        guard let serving = holder.current else { throw APIError.noIndex }
        let id = rawID.removingPercentEncoding ?? rawID
        let found: Chunk?
        do {
            found = try serving.index.chunk(id: id)
        } catch {
            logger.error("chunk fetch failed", metadata: ["cairn.error": "\(error)"])
            throw APIError.internalError
        }
        guard let found else { throw APIError(.notFound, "chunk_not_found", "the installed version has no chunk with that id") }
        return try Self.json(ChunkAnswer(chunk: found, version: serving.version, stateRoot: serving.stateRoot))
    }

    func statusAnswer() async throws -> Response {
        let sync = await status.syncStatus()
        let answer = DaemonStatus(serving: holder.current, dataDirectory: dataDirectory,
                                  dataDirectoryBytes: DiskUsage.bytes(under: dataDirectory),
                                  syncAvailable: requestSync != nil, sync: sync)
        return try Self.json(answer)
    }

    func sync() async throws -> Response {
        guard let requestSync else {
            throw APIError(.serviceUnavailable, "sync_unavailable", "this cairnd runs without a sync component")
        }
        await requestSync()
        return try Self.json(["accepted": true], status: .accepted)
    }

    // MARK: Helpers

    static func checkContentType(_ request: Request) throws {
        guard let value = request.headers[.contentType] else { return }
        let type = value.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        guard type == "application/json" || type == "application/x-www-form-urlencoded" else {
            throw APIError(.unsupportedMediaType, "bad_content_type",
                           "send the body as application/json (application/x-www-form-urlencoded is read as JSON too)")
        }
    }

    /// The body, refused before reading when its declared length is over the limit, and cut
    /// off at the limit when it is chunked.
    func readBody(_ request: Request) async throws -> Data {
        let tooLarge = APIError(.contentTooLarge, "body_too_large", "the request body is larger than \(maxBodyBytes) bytes")
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > maxBodyBytes { throw tooLarge }
        do {
            var buffer = try await request.body.collect(upTo: maxBodyBytes)
            return Data(buffer.readBytes(length: buffer.readableBytes) ?? [])
        } catch {
            throw tooLarge
        }
    }

    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(value)
        return Response(status: status, headers: [.contentType: "application/json; charset=utf-8"],
                        body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1_000 + Double(attoseconds) / 1e15
    }
}
