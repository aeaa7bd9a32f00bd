import ArgumentParser
import CairnClient
import Foundation

/// The CLI's side of the socket API: finds the socket, sends one request, and turns failures
/// into the documented exit codes (1 daemon error, 3 unreachable, 4 no index, 5 nothing to
/// roll back to).
struct DaemonConnection {
    let socketPath: String
    /// Said beside "cannot reach": the config file whose socket was not used (`skippedNote`).
    let note: String?

    init(root: ConnectionOptions, local: ConnectionOptions, environment: [String: String] = ProcessInfo.processInfo.environment) {
        socketPath = local.socket ?? root.socket ?? Self.defaultSocket(environment: environment)
        note = local.socket ?? root.socket == nil ? CairndConfigFile.skippedNote(environment: environment) : nil
    }

    static func defaultSocket(environment: [String: String]) -> String {
        CairndConfigFile.socketPath(environment: environment)
    }

    /// The 2xx response body, or exits with the documented code after printing one line.
    func call(_ method: String, _ path: String, body: [UInt8]? = nil, timeout: Double = 60) throws -> [UInt8] {
        guard let answer = try callIfReachable(method, path, body: body, timeout: timeout, unreachable: { message in
            fail("\(message); is cairnd running? Start it, or pass --socket (or set CAIRN_SOCKET) to its socket"
                 + (note.map { " (\($0))" } ?? ""))
        }) else { throw ExitCode(3) }
        return answer
    }

    /// As `call`, but nil when cairnd cannot be reached (no socket, or nothing listening on it:
    /// it may be restarting), after calling `unreachable` with the reason.
    func callIfReachable(_ method: String, _ path: String, body: [UInt8]? = nil, timeout: Double = 60,
                         unreachable: (String) -> Void) throws -> [UInt8]? {
        let response: UnixHTTPClient.Response
        do {
            response = try UnixHTTPClient(socketPath: socketPath, timeout: timeout).send(method: method, path: path, body: body)
        } catch where error.code == .unreachable {
            unreachable(error.message)
            return nil
        } catch {
            fail(error.message)
            throw ExitCode(1)
        }
        guard (200..<300).contains(response.status) else {
            let problem = try? JSONDecoder().decode([String: String].self, from: Data(response.body))
            let code = problem?["code"] ?? "http_\(response.status)"
            fail("\(problem?["message"] ?? "cairnd answered \(response.status)") (\(code))")
            throw ExitCode(Self.exitCodes[code] ?? 1)
        }
        return response.body
    }

    /// Error codes with an exit code of their own (protocol/socket-api.md, "The cairn client").
    static let exitCodes = ["no_index": Int32(4), "no_previous_version": 5]

    func decode<T: Decodable>(_ type: T.Type, from body: [UInt8]) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: Data(body))
        } catch {
            fail("cairnd's answer is not the expected JSON; is the daemon the same version as this CLI?")
            throw ExitCode(1)
        }
    }

    func fail(_ message: String) {
        FileHandle.standardError.write(Data("cairn: \(message)\n".utf8))
    }
}

/// Prints a server's JSON body as it came.
func printRaw(_ body: [UInt8]) {
    print(String(decoding: body, as: UTF8.self))
}
