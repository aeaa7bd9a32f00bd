import CairnClient
import CairnCore
import CairnSearch
public import CairnSync
import Foundation
import Hummingbird

/// Rollback and export as the daemon sees them (CairnSync's `Syncer` provides both).
public protocol DeviceMaintenance: Sendable {
    func rollback() async throws(SyncError) -> RollbackResult
    func export(to target: String) async throws(SyncError) -> ExportResult
}

extension Syncer: DeviceMaintenance {}

/// The body of `POST /v1/rollback`.
struct RollbackAnswer: Encodable {
    var version: Int
    var stateRoot: String
    var rolledBackFrom: Int
    var heldBackVersion: Int

    enum CodingKeys: String, CodingKey {
        case version, stateRoot = "state_root", rolledBackFrom = "rolled_back_from", heldBackVersion = "held_back_version"
    }
}

extension DaemonAPI {
    /// A maintenance request's body as an object; `bad_json` when it is not one, names a key
    /// twice, or is not UTF-8 (a byte-order mark or UTF-16 would take Foundation past the check
    /// for repeated keys: `{"channel": "a", "channel": "b"}` read as either channel).
    static func jsonObject(_ body: [UInt8]) throws(APIError) -> [String: Any] {
        switch CanonicalJSON.checkKeys(body) {
        case .unique: break
        case .repeated: throw APIError.repeatedKey
        case .unreadable: throw APIError.badJSON()
        }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else { throw APIError.badJSON() }
        return object
    }

    /// An unknown key of a request, named back only when it is short and plain: it is the
    /// caller's text.
    static func field(_ key: String) -> String {
        key.count <= 32 && key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) ? "`\(key)`" : "a key"
    }

    /// `POST /v1/rollback`, of the daemon's own channel or of `{"channel": NAME}`.
    func rollback(_ request: Request) async throws -> Response {
        let body = try await readBody(request)
        var channel: String?
        if !body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            let object = try Self.jsonObject(body)
            if let unknown = object.keys.sorted().first(where: { $0 != "channel" }) {
                throw APIError(400, "unknown_field", "\(Self.field(unknown)) is not a field of a rollback request; it takes \"channel\"")
            }
            channel = try Self.channelField(object)
        }
        let maintenance = try availableMaintenance(channel: channel)
        let result: RollbackResult
        do { result = try await maintenance.rollback() } catch { throw Self.apiError(error, failure: "rollback_failed") }
        return Self.json(RollbackAnswer(version: result.version.version, stateRoot: result.version.stateRoot.hex,
                                            rolledBackFrom: result.rolledBackFrom, heldBackVersion: result.rolledBackFrom))
    }

    func export(_ request: Request) async throws -> Response {
        let body = try await readBody(request)
        let object = try Self.jsonObject(body)
        if let unknown = object.keys.sorted().first(where: { $0 != "to" && $0 != "channel" }) {
            throw APIError(400, "unknown_field", "\(Self.field(unknown)) is not a field of an export request; it takes \"to\" and \"channel\"")
        }
        guard let target = object["to"] as? String else {
            throw APIError(400, "bad_path", "send {\"to\": \"/absolute/folder\"}")
        }
        let maintenance = try availableMaintenance(channel: try Self.channelField(object))
        let result: ExportResult
        do { result = try await maintenance.export(to: target) } catch { throw Self.apiError(error, failure: "export_failed") }
        return Self.json(result)
    }

    /// A rollback's or export's `"channel"`: absent is the daemon's own; anything but a string
    /// (a number, `null` from an unset template variable) is 400 `bad_json`, never read as "the
    /// daemon's own", which would roll back or export a channel the caller did not name.
    static func channelField(_ object: [String: Any]) throws(APIError) -> String? {
        guard let value = object["channel"] else { return nil }
        guard let name = value as? String else { throw APIError.badJSON("\"channel\" must be a string naming a channel") }
        return name
    }

    /// The rollback and export of `channel` (nil or the daemon's own: its own).
    private func availableMaintenance(channel name: String? = nil) throws -> any DeviceMaintenance {
        if let name, name != channel {
            let other = try followed(name)
            guard let maintenance = other.maintenance else {
                throw APIError(503, "sync_unavailable", "channel \(name) has no data directory this cairnd manages")
            }
            return maintenance
        }
        guard let maintenance else {
            throw APIError(503, "sync_unavailable", "this cairnd runs without a data directory it manages")
        }
        return maintenance
    }

    /// Refusals keep their code (409/400/503), a full disk is 507 `disk_full`, a stop of cairnd
    /// 503 `stopping`; anything else is an
    /// I/O failure named `failure`.
    static func apiError(_ error: SyncError, failure: String) -> APIError {
        switch error.code {
        case .noPreviousVersion, .previousUnusable, .exportTargetNotEmpty, .exportUnreproducible, .exportUntrusted:
            APIError(409, error.code.name, error.message)
        case .badPath: APIError(400, "bad_path", error.message)
        case .diskFull: APIError(507, "disk_full", error.message)
        case .notInstalled: APIError.noIndex
        // cairnd is stopping (SIGTERM): not a failure of the request, and worth trying again.
        case .cancelled: APIError(503, "stopping", error.message)
        default: APIError(500, failure, error.message)
        }
    }
}
