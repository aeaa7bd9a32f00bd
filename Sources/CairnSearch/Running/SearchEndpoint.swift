import CairnEmbedding
import CairnIndex
import Foundation
public import Logging

/// One search request from bytes on the wire to the JSON answer, the same for cairnd's
/// `POST /v1/search` and cairn-server's `POST /v1/channels/<c>/search`: content type, body
/// size, strict parsing, the bounded worker pool, the engine, the answer. The HTTP layers only
/// hand over the request's parts and turn an `APIError` into a response with `error.body`.
public struct SearchEndpoint: Sendable {
    public let pool: SearchPool
    /// Bodies larger than this are refused with 413 `body_too_large`.
    public let maxBodyBytes: Int
    let logger: Logger

    public init(pool: SearchPool, maxBodyBytes: Int, logger: Logger) {
        self.pool = pool
        self.maxBodyBytes = maxBodyBytes
        self.logger = logger
    }

    /// A request body that must be JSON: the content type checked (415 `bad_content_type`),
    /// and at most `maxBodyBytes` read (413 `body_too_large`, before reading when the declared
    /// length is over).
    /// - Parameters:
    ///   - contentType, contentLength: the request's headers, when present.
    ///   - readBody: collects the body, at most `limit` bytes (throwing past it).
    public func body(contentType: String?, contentLength: String?,
                     readBody: (_ limit: Int) async throws -> [UInt8]) async throws(APIError) -> [UInt8] {
        try Self.checkContentType(contentType)
        if let declared = contentLength.flatMap(Int.init), declared > maxBodyBytes { throw .bodyTooLarge(limit: maxBodyBytes) }
        do { return try await readBody(maxBodyBytes) } catch { throw .bodyTooLarge(limit: maxBodyBytes) }
    }

    /// The answer's JSON bytes for a search request body (read with `body(…)`).
    /// - Parameters:
    ///   - flags: `online` / `stale` / `expired` at the time of the answer (nil: unknown or not applicable).
    ///   - version: the version to search, called once on the worker that runs the search, so
    ///     it may block (load a version) and every result comes from the one it returns.
    public func search(body: [UInt8], flags: () async -> SearchAnswer.Flags,
                       version: @escaping @Sendable () throws(APIError) -> ServingVersion) async throws(APIError) -> [UInt8] {
        let request = try SearchBody.parse(body)
        let flags = await flags()
        let logger = self.logger
        let answer = try await pool.run { () throws(APIError) -> SearchAnswer in
            try Self.run(request, on: try version(), flags: flags, logger: logger)
        }
        return APIJSON.encode(answer)
    }

    /// Embeds the query with the version's own model (unless lexical) while the lexical part
    /// runs beside it (`SearchIndex.search(_:embed:)`), and searches the version's index.
    static func run(_ request: SearchRequest, on serving: ServingVersion, flags: SearchAnswer.Flags,
                    logger: Logger) throws(APIError) -> SearchAnswer {
        let clock = ContinuousClock()
        let start = clock.now
        var embedTime = Duration.zero
        do {
            let response = try serving.index.search(request) { () -> [Float]? in
                guard let embedder = serving.embedder else { return nil }
                let embedStart = clock.now
                defer { embedTime = clock.now - embedStart }
                return embedder.embed(request.query)
            }
            return SearchAnswer(response, denseAvailable: serving.denseAvailable, flags: flags,
                                embedMilliseconds: milliseconds(embedTime), totalMilliseconds: milliseconds(clock.now - start))
        } catch {
            logger.error("search failed", metadata: ["cairn.snapshot.version": "\(serving.version)", "cairn.error": "\(error)"])
            throw APIError.internalError
        }
    }

    /// `application/json` (any parameters), `application/x-www-form-urlencoded` (what `curl -d`
    /// sends; still parsed as JSON) or none; anything else is 415 `bad_content_type`.
    static func checkContentType(_ value: String?) throws(APIError) {
        guard let value else { return }
        let type = value.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        guard type == "application/json" || type == "application/x-www-form-urlencoded" else { throw .badContentType }
    }

    static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1_000 + Double(attoseconds) / 1e15
    }
}
