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
    /// length is over). A body that breaks off before its end is 400 `bad_request`.
    /// - Parameters:
    ///   - contentType, contentLength: the request's headers, when present.
    ///   - readBody: collects the body: nil when it holds more than `limit` bytes; throws when
    ///     it breaks off (the connection closed before the body's end).
    public func body(contentType: String?, contentLength: String?,
                     readBody: (_ limit: Int) async throws -> [UInt8]?) async throws(APIError) -> [UInt8] {
        try Self.checkContentType(contentType)
        let declared = contentLength.flatMap(Int.init)
        if let declared, declared > maxBodyBytes { throw .bodyTooLarge(limit: maxBodyBytes) }
        let bytes: [UInt8]?
        do { bytes = try await readBody(maxBodyBytes) } catch { throw .bodyBrokenOff }
        guard let bytes else { throw .bodyTooLarge(limit: maxBodyBytes) }
        // Fewer bytes than declared: the stream ended early without saying so.
        if let declared, bytes.count < declared { throw .bodyBrokenOff }
        return bytes
    }

    /// The answer's JSON bytes for a search request body (read with `body(…)`).
    /// - Parameters:
    ///   - flags: `online` / `stale` / `expired` at the time of the answer (nil: unknown or not applicable).
    ///   - version: the version to search, called once on the worker that runs the search, so
    ///     it may block (load a version) and every result comes from the one it returns.
    public func search(body: [UInt8], channel: String, flags: () async -> SearchAnswer.Flags,
                       version: @escaping @Sendable () throws(APIError) -> ServingVersion) async throws(APIError) -> [UInt8] {
        let parsed = try SearchBody.parseBody(body)
        // One channel answers here (the URL's): `channels` naming another is refused as cairnd
        // refuses a channel it does not follow, not ignored.
        if let names = parsed.channels, names != [channel] {
            throw APIError(400, "unknown_channel", "\"channels\" names a channel this URL does not search; it searches \(channel)")
        }
        let request = parsed.request
        let flags = await flags()
        let logger = self.logger
        let answer = try await pool.run { () throws(APIError) -> SearchAnswer in
            try Self.run(request, on: try version(), flags: flags, logger: logger)
        }
        return try APIJSON.encode(answer: answer)
    }

    /// One channel a daemon may search: its name, its flags for the version that answers, and
    /// how to take that version.
    public struct Channel: Sendable {
        public let name: String
        public let flags: @Sendable (ServingVersion) -> SearchAnswer.Flags
        public let version: @Sendable () throws(APIError) -> ServingVersion

        public init(name: String, flags: @escaping @Sendable (ServingVersion) -> SearchAnswer.Flags,
                    version: @escaping @Sendable () throws(APIError) -> ServingVersion) {
            self.name = name
            self.flags = flags
            self.version = version
        }
    }

    /// The answer's JSON bytes for a search over channels: `select` turns the body's `channels`
    /// (nil: all) into the channels to search, in order. Each is searched with its own version and
    /// model; the results, each naming its channel and version, are merged by the score that
    /// ranked them (standardised in hybrid, so comparable across channels) and cut to k. One
    /// channel gives exactly that channel's answer, results labelled. A channel with nothing
    /// installed is left out; none installed is `no_index`. Over several channels each gives its
    /// best 100, so the merged answer does not depend on k.
    public func search(_ parsed: SearchBody, select: ([String]?) async throws(APIError) -> [Channel]) async throws(APIError) -> [UInt8] {
        let received = ContinuousClock.now
        let channels = try await select(parsed.channels)
        let request = parsed.request
        let logger = self.logger
        var answer = try await pool.run { () throws(APIError) -> SearchAnswer in
            var answers: [(String, SearchAnswer)] = []
            // Over several channels each answers its best 100 whatever k is, so that the merged
            // first n are the same at any k ≥ n (a channel's 11th may be the union's 5th).
            var deep = request
            if channels.count > 1 { deep.k = SearchRequest.kRange.upperBound }
            var unserved: APIError?
            for channel in channels {
                let serving: ServingVersion
                do throws(APIError) { serving = try channel.version() } catch {
                    unserved = unserved ?? error
                    continue
                }
                answers.append((channel.name, try Self.run(deep, on: serving, flags: channel.flags(serving), logger: logger)))
            }
            guard !answers.isEmpty else { throw unserved ?? APIError.noIndex }
            return Self.merge(answers, k: request.k, searched: channels.count)
        }
        // The whole of what the caller waited for once its body was read: the wait for a search
        // thread (under load, most of it) and every channel's search, not the first's alone.
        answer.timings.totalMilliseconds = Self.milliseconds(.now - received)
        return try APIJSON.encode(answer: answer)
    }

    /// The results of every channel's answer, labelled, best first by their ranking score, cut
    /// to `k`; the first answer's version, mode and timings; the channels that answered listed
    /// whenever several were searched (`searched`), even if one answered alone (the others had
    /// nothing installed): else the answer read as the first channel's, whose name and version
    /// a caller takes from the request and status.
    /// When every answer is a weighted hybrid, each result's `fused_score` is taken again over
    /// the union of the channels' rows (their moments pooled), so a channel's size or score
    /// spread does not decide which one wins. When the answers were ranked in different ways (a
    /// channel without a usable model answers lexically; one whose cosines were degenerate for
    /// this query falls back to lexical), their scores are on different scales (−BM25 against
    /// z-scores, cosines or 1/(60 + rank)): they are merged by rank instead, each result's
    /// `fused_score` 1/(60 + its rank in its channel), and the answer's fusion is `rrf`. Each
    /// channel's entry says how it ranked and whether it had a model; `dense_available` is true
    /// only when every channel's is.
    static func merge(_ answers: [(channel: String, answer: SearchAnswer)], k: Int, searched: Int? = nil) -> SearchAnswer {
        var merged = answers[0].answer
        let moments = answers.compactMap(\.answer.hybridMoments)
        let pooled = answers.count > 1 && moments.count == answers.count ? moments.dropFirst().reduce(moments[0]) { $0.pooled(with: $1) } : nil
        let byRank = Set(answers.map { "\($0.answer.mode.rawValue) \($0.answer.fusion.rawValue)" }).count > 1
        if byRank { merged.fusion = .rrf }
        var results = answers.enumerated().flatMap { order, entry in
            entry.answer.results.map { result -> (Int, SearchResult) in
                var labelled = result
                labelled.channel = entry.channel
                labelled.version = entry.answer.version
                if byRank {
                    labelled.fusedScore = 1 / Double(60 + result.rank)
                } else if let pooled, let dense = result.denseScore {
                    labelled.fusedScore = pooled.fused(lexical: result.lexicalScore, dense: dense)
                }
                return (order, labelled)
            }
        }
        results.sort { a, b in
            a.1.fusedScore != b.1.fusedScore ? a.1.fusedScore > b.1.fusedScore : (a.0, a.1.rank) < (b.0, b.1.rank)
        }
        merged.results = results.prefix(k).enumerated().map { index, entry in
            var result = entry.1
            result.rank = index + 1
            return result
        }
        merged.unmatchedFilter = SearchResponse.UnmatchedFilter.common(answers.map(\.answer.unmatchedFilter))
        guard max(answers.count, searched ?? 0) > 1 else { return merged }
        merged.channels = answers.map {
            .init(channel: $0.channel, version: $0.answer.version, stateRoot: $0.answer.stateRoot,
                  online: $0.answer.online, stale: $0.answer.stale, expired: $0.answer.expired,
                  mode: $0.answer.mode, fusion: $0.answer.fusion, denseAvailable: $0.answer.denseAvailable)
        }
        // Dense search is available to the answer only where every channel had a model: a
        // channel without one answered lexically, which its own entry says.
        merged.denseAvailable = answers.allSatisfy(\.answer.denseAvailable)
        merged.stale = answers.contains { $0.answer.stale == true } ? true : merged.stale
        merged.expired = answers.contains { $0.answer.expired == true } ? true : merged.expired
        merged.online = answers.allSatisfy { $0.answer.online == true } ? true : answers.contains { $0.answer.online == false } ? false : nil
        return merged
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
