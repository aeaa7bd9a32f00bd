import CairnClient
import CairnCore
import CairnHTTP
import CairnIndex
import CairnSearch
import CairnSync
import Foundation
import Hummingbird
import Logging

/// The socket API's handlers (protocol/socket-api.md): stateless apart from the shared
/// `IndexHolder`, status provider and search endpoint (CairnSearch, shared with cairn-server).
struct DaemonAPI: Sendable {
    let holder: IndexHolder
    let status: any SyncStatusProvider
    let requestSync: (@Sendable () async -> [String: Int])?
    let maintenance: (any DeviceMaintenance)?
    let metrics: DaemonMetrics?
    /// The daemon's own channel and the further ones.
    let channel: String
    let channels: [ChannelHooks]
    let endpoint: SearchEndpoint
    let dataDirectory: String
    /// `operator_group` and the look-ups that judge its members (`requireOperator`).
    let callers: CallerDirectory
    let logger: Logger

    func addRoutes(to router: Router<DaemonRequestContext>) {
        router.add(middleware: ErrorMiddleware(logger: logger))
        router.get("healthz") { _, _ in Self.json(["ok": true]) }
        router.get("v1/status") { _, _ in try await statusAnswer() }
        router.get("metrics") { _, _ in try await metricsAnswer() }
        router.post("v1/search") { request, _ in try await search(request) }
        router.get("v1/chunks/:id") { request, context in
            try await chunk(context.parameters.require("id"), channel: request.uri.queryParameters["channel"].map(String.init),
                      version: request.uri.queryParameters["version"].map(String.init))
        }
        router.post("v1/sync") { _, _ in try await sync() }
        router.post("v1/rollback") { request, context in
            try await requireOperator(context, for: "rollback", .withGroup)
            return try await rollback(request)
        }
        router.post("v1/export") { request, context in
            try await requireOperator(context, for: "export", .cairndsUserAndRoot)
            return try await export(request)
        }
    }

    /// The allowed methods of each route, for 405 answers (`*` matches one path segment).
    static let routes: [(path: [String], methods: [HTTPRequest.Method])] = [
        (["healthz"], [.get, .head]), (["metrics"], [.get, .head]), (["v1", "status"], [.get, .head]), (["v1", "search"], [.post]),
        (["v1", "chunks", "*"], [.get, .head]), (["v1", "sync"], [.post]), (["v1", "rollback"], [.post]),
        (["v1", "export"], [.post]),
    ]

    // MARK: Handlers

    func search(_ request: Request) async throws -> Response {
        let started = ContinuousClock.now
        let body: [UInt8]
        do { body = try await readBody(request) } catch {
            metrics?.recordQuery(mode: "unknown", outcome: error.code, duration: .now - started)
            throw error
        }
        let parsed: SearchBody
        do { parsed = try SearchBody.parseBody(body) } catch {
            metrics?.recordQuery(mode: Self.requestedMode(body), outcome: error.code, duration: .now - started)
            throw error
        }
        let mode = parsed.request.mode.rawValue
        do {
            let response = try await searchAnswer(parsed)
            metrics?.recordQuery(mode: mode, outcome: "ok", duration: .now - started)
            return response
        } catch let error as APIError {
            metrics?.recordQuery(mode: mode, outcome: error.code, duration: .now - started)
            throw error
        }
    }

    /// The mode a refused search body asks for, as a metrics label (read again only on that
    /// path): one of the four, else `hybrid` when absent, `invalid` otherwise.
    static func requestedMode(_ body: [UInt8]) -> String {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any],
              let mode = object["mode"] else { return "hybrid" }
        guard let text = mode as? String, SearchRequest.Mode(rawValue: text) != nil else { return "invalid" }
        return text
    }

    func metricsAnswer() async throws -> Response {
        guard let metrics else { throw APIError(404, "metrics_unavailable", "this cairnd keeps no metrics") }
        for other in channels {
            other.metrics?.setGauges(status: await other.status.syncStatus(), version: other.holder.current?.version)
        }
        let text = metrics.exposition(status: await status.syncStatus(), version: holder.current?.version)
        return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                        body: .init(byteBuffer: ByteBuffer(bytes: text)))
    }

    func searchAnswer(_ parsed: SearchBody) async throws -> Response {
        let all = [ChannelHooks(name: channel, holder: holder, status: status)] + channels
        let answer = try await endpoint.search(parsed) { (names: [String]?) async throws(APIError) -> [SearchEndpoint.Channel] in
            var chosen = all
            if let names {
                chosen = []
                for name in names {
                    guard let found = all.first(where: { $0.name == name }) else {
                        throw APIError(400, "unknown_channel", "\"channels\" names a channel this cairnd does not follow; it follows \(all.map(\.name).joined(separator: ", "))")
                    }
                    chosen.append(found)
                }
            }
            var selected: [SearchEndpoint.Channel] = []
            for hooks in chosen {
                // The version is taken once: every result of this query comes from it, even if a
                // new version is installed meanwhile, and its flags are judged on it.
                selected.append(SearchEndpoint.Channel(
                    name: hooks.name,
                    flags: await hooks.status.searchFlags(),
                    version: { [holder = hooks.holder] () throws(APIError) -> ServingVersion in
                        guard let serving = holder.current else { throw holder.noIndex }
                        return serving
                    }))
            }
            return selected
        }
        return Self.json(bytes: answer)
    }

    /// The request's JSON body, with the search endpoint's content-type and size rules.
    func readBody(_ request: Request) async throws(APIError) -> [UInt8] {
        try await endpoint.body(contentType: request.headers[.contentType], contentLength: request.headers[.contentLength]) {
            try await request.bodyBytes(upTo: $0)
        }
    }

    /// The further channel `name` (not the daemon's own), or 400 `unknown_channel`.
    func followed(_ name: String) throws(APIError) -> ChannelHooks {
        guard let other = channels.first(where: { $0.name == name }) else {
            // Named back only when it is a channel name at all: the value is the caller's text.
            let named = Manifest.isValidChannelName(name) ? "channel \(name)" : "that channel (not a channel name)"
            throw APIError(400, "unknown_channel", "this cairnd does not follow \(named); it follows \(([channel] + channels.map(\.name)).joined(separator: ", "))")
        }
        return other
    }

    /// The chunk `rawID` of `name`'s serving version (nil: the daemon's own channel). With
    /// `version` (the one a search answered from), 409 `version_changed` when another version
    /// serves now: the passage read back must be the one the search found, or said not to be.
    /// Read on a search thread (503 `busy` when their queue is full), not on the threads that
    /// serve connections: a row on a cold SD card is milliseconds of blocking reads.
    func chunk(_ rawID: String, channel name: String?, version wanted: String? = nil) async throws -> Response {
        let pinned: Int?
        if let wanted {
            guard let number = Int(wanted), number >= 1 else {
                throw APIError(400, "bad_version", "version must be a version number (the `version` of a search result)")
            }
            pinned = number
        } else {
            pinned = nil
        }
        var (holder, channel) = (self.holder, self.channel)
        if let name, name != channel {
            let other = try followed(name)
            (holder, channel) = (other.holder, other.name)
        }
        guard let serving = holder.current else { throw holder.noIndex }
        if let pinned, pinned != serving.version {
            throw APIError(409, "version_changed", ChunkAnswer.versionChanged(pinned: pinned, serving: serving.version))
        }
        let id = rawID.removingPercentEncoding ?? rawID
        let logger = self.logger
        let found = try await endpoint.pool.run { () throws(APIError) -> Chunk? in
            do { return try serving.index.chunk(id: id) } catch {
                logger.error("chunk fetch failed", metadata: ["cairn.error": "\(error)"])
                throw APIError.internalError
            }
        }
        guard let found else { throw APIError(404, "chunk_not_found", "the installed version has no chunk with that id") }
        return Self.json(ChunkAnswer(chunk: found, version: serving.version, stateRoot: serving.stateRoot, channel: channel))
    }

    func statusAnswer() async throws -> Response {
        let sync = await status.syncStatus()
        // Each channel's serving version is read once: a swap between two reads would pair one
        // version's number with another's state root.
        let serving = holder.current
        var answer = DaemonStatus(serving: serving, dataDirectory: dataDirectory,
                                  dataDirectoryBytes: DiskUsage.bytes(under: dataDirectory),
                                  syncAvailable: requestSync != nil, sync: sync)
        answer.notServing = holder.unservableReason
        // Installed, though not served: not_serving says why.
        answer.installed = serving != nil || answer.notServing != nil
        answer.software = CairnVersion.date
        var list = [DaemonStatus.ChannelState(channel: channel, serving: serving?.version, stateRoot: serving?.stateRoot, sync: sync)]
        for other in channels {
            let serving = other.holder.current
            list.append(DaemonStatus.ChannelState(channel: other.name, serving: serving?.version, stateRoot: serving?.stateRoot,
                                                  sync: await other.status.syncStatus()))
        }
        answer.channels = list
        return Self.json(answer)
    }

    func sync() async throws -> Response {
        guard let requestSync else {
            throw APIError(503, "sync_unavailable", "this cairnd has no source to sync from; " + Device.noSourceRemedy)
        }
        let attempts = await requestSync()
        return Self.json(SyncAccepted(accepted: true, attempts: attempts), status: .accepted)
    }

    // MARK: Helpers

    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
        do { return json(bytes: try APIJSON.encode(answer: value), status: status) } catch { return response(for: error) }
    }

    static func json(bytes: [UInt8], status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: APIJSON.contentType], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// The JSON error answer.
    static func response(for error: APIError) -> Response {
        // A sync's error may name a source with its password (`SourceURL.redactingPasswords`).
        let error = APIError(error.status, error.code, SourceURL.redactingPasswords(in: error.message), allow: error.allow)
        var response = json(bytes: error.body, status: HTTPResponse.Status(code: error.status))
        if let allow = error.allow { response.headers[.allow] = allow }
        return response
    }
}

/// The answer to `POST /v1/sync`: per channel, the number of the attempt that answers it (the
/// first to start after the request); status's `attempts_finished` reaches it when it has ended.
struct SyncAccepted: Encodable {
    let accepted: Bool
    let attempts: [String: Int]
}
