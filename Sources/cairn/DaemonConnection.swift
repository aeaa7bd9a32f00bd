import ArgumentParser
import CairnClient
import CairnCommandLine
import Foundation

/// The CLI's side of the socket API: finds the socket, sends one request, and turns failures
/// into the documented exit codes (1 daemon error, 3 unreachable, 4 no index, 5 nothing to
/// roll back to).
struct DaemonConnection {
    let socketPath: String
    /// Said beside "cannot reach": the config file whose socket was not used (`skippedNote`).
    let note: String?
    /// Runs before a failure's line is written (`sync --wait` clears its progress bar).
    var beforeFailing: (() -> Void)?
    /// `--json`: a failure is also printed on standard output, as the socket's error object.
    var jsonErrors = false

    init(root: ConnectionOptions, local: ConnectionOptions, json: Bool = false,
         environment: [String: String] = ProcessInfo.processInfo.environment) {
        jsonErrors = json
        socketPath = local.socket ?? root.socket ?? Self.defaultSocket(environment: environment)
        note = local.socket ?? root.socket == nil ? CairndConfigFile.skippedNote(environment: environment) : nil
    }

    static func defaultSocket(environment: [String: String]) -> String {
        CairndConfigFile.socketPath(environment: environment)
    }

    /// The 2xx response body, or exits with the documented code after printing one line.
    func call(_ method: String, _ path: String, body: [UInt8]? = nil, timeout: Double = 60) throws -> [UInt8] {
        guard let answer = try callIfReachable(method, path, body: body, timeout: timeout, unreachable: failUnreachable)
        else { throw ExitCode(3) }
        return answer
    }

    /// `call` for a request that may rightly take long (a rollback verifies a whole index, an
    /// export copies one: `timeout` an hour), after checking within 10 s that cairnd answers at
    /// all: one stopped or hung still takes connections, and the request would then wait the
    /// whole hour in silence (exit 3 instead, as for `sync --wait`).
    /// `asking`: called once cairnd answered its health check, before the request is sent.
    func callLong(_ method: String, _ path: String, body: [UInt8], timeout: Double, asking: () -> Void = {}) throws -> [UInt8] {
        guard try callIfReachable("GET", "/healthz", timeout: 10, treating: [.unreachable, .noAnswer], unreachable: { error in
            error.code == .noAnswer ? fail("\(error.message.prefix { $0 != ";" }): it is stopped, hung, or every connection it takes (max_connections) is held; nothing was asked of it", code: "\(error.code)") : failUnreachable(error)
        }) != nil else { throw ExitCode(3) }
        asking()
        return try call(method, path, body: body, timeout: timeout)
    }

    /// The line for a socket that cannot be reached: why, and what to do.
    func failUnreachable(_ error: ClientError) {
        fail("\(error.message); \(Self.remedy(for: error.cause))" + (note.map { " (\($0))" } ?? ""), code: "\(error.code)")
    }

    /// What to do when the socket cannot be reached, by the connect's errno: "is cairnd
    /// running?" is the wrong question when it runs and this user may not use its socket.
    static func remedy(for cause: (any Error)?) -> String {
        switch (cause as? UnixSocket.Errno)?.code {
        case EACCES, EPERM:
            "this user may not use the socket or its folder: cairnd's socket_mode and socket_group say who may "
                + "(add this user to that group), or pass --socket (or set CAIRN_SOCKET) to another cairnd's socket"
        case ENAMETOOLONG:
            "a Unix socket's path must be shorter than 108 bytes; pass a shorter --socket (or CAIRN_SOCKET)"
        default:
            "is cairnd running? Start it, or pass --socket (or set CAIRN_SOCKET) to its socket"
        }
    }

    /// As `call`, but nil when cairnd cannot be reached (no socket, or nothing listening on it:
    /// it may be restarting), after calling `unreachable` with the reason.
    /// `treating`: the failures taken as unreachable (`sync --wait` adds a cairnd that takes the
    /// connection but does not answer: hung, for its 10 s rule).
    func callIfReachable(_ method: String, _ path: String, body: [UInt8]? = nil, timeout: Double = 60,
                         treating unreachableCodes: Set<ClientError.Code> = [.unreachable],
                         unreachable: (ClientError) -> Void) throws -> [UInt8]? {
        let response: UnixHTTPClient.Response
        do {
            response = try UnixHTTPClient(socketPath: socketPath, timeout: timeout).send(method: method, path: path, body: body)
        } catch where unreachableCodes.contains(error.code) {
            unreachable(error)
            return nil
        } catch {
            fail(error.message, code: "\(error.code)")
            throw ExitCode(1)
        }
        guard (200..<300).contains(response.status) else {
            let problem = try? JSONDecoder().decode([String: String].self, from: Data(response.body))
            let code = problem?["code"] ?? "http_\(response.status)"
            let message = problem?["message"] ?? "cairnd answered \(response.status)"
            fail("\(message) (\(code))", code: code, message: message)
            throw ExitCode(Self.exitCodes[code] ?? 1)
        }
        return response.body
    }

    /// Error codes with an exit code of their own (protocol/socket-api.md, "The cairn client").
    /// `forbidden` is sysexits' EX_NOPERM, as cairn-server's refusals of a key are.
    static let exitCodes = ["no_index": Int32(4), "no_previous_version": 5, "forbidden": 77]

    func decode<T: Decodable>(_ type: T.Type, from body: [UInt8]) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: Data(body))
        } catch {
            fail("cairnd's answer is not the expected JSON; is the daemon the same version as this CLI?", code: "bad_answer")
            throw ExitCode(1)
        }
    }

    /// Says why the command fails: `cairn: LINE` on standard error, and under `--json` the
    /// socket's error object, `code` and `message` (the line when nil), on standard output
    /// (protocol/socket-api.md, "The `cairn` client"). No `code`: the line alone.
    func fail(_ line: String, code: String? = nil, message: String? = nil) {
        beforeFailing?()
        writeStandardError("cairn: \(line)\n")
        if jsonErrors, let code,
           let object = try? JSONSerialization.data(withJSONObject: ["code": code, "message": message ?? line], options: [.sortedKeys, .withoutEscapingSlashes]) {
            print(String(decoding: object, as: UTF8.self))
            fflush(nil)
        }
    }
}

extension DaemonConnection {
    /// Prints cairnd's JSON body as it came (`--json`), once it is known to be JSON: a script
    /// must not get exit 0 with an answer cut short, or one from something else on the socket.
    func printJSON(_ body: [UInt8]) throws {
        guard (try? JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed])) != nil else {
            fail("cairnd's answer is not JSON; is the daemon the same version as this CLI?", code: "bad_answer")
            throw ExitCode(1)
        }
        print(String(decoding: body, as: UTF8.self))
    }
}
