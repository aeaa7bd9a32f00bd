import CairnTestSupport
import Foundation
import Testing

/// `cairn mcp` driven by a client nobody here wrote: the official MCP Python SDK's stdio client
/// (PyPI `mcp`, in the venv scripts/test makes), through Tests/Reference/mcp_check.py, against a
/// real cairnd on its socket.
@Suite("Agents: cairn mcp with the MCP Python SDK (real processes)", .offCooperativePool, .serialized)
struct AgentTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    /// The venv's python when it can import `module`.
    static func python(with module: String) async throws -> String? {
        guard let python = ProcessInfo.processInfo.environment["CAIRN_PYTHON"],
              FileManager.default.isExecutableFile(atPath: python) else { return nil }
        return try await run(python, ["-c", "import \(module)"]).status == 0 ? python : nil
    }

    @Test("Given a device serving version 1, when the MCP SDK's client starts cairn mcp, then it initializes, lists three tools, and search, get and status answer; errors are tool errors with the daemon's code, and an absent cairnd fails fast")
    func mcpWithTheOfficialClient() async throws {
        let python = try requireOrSkip(try await Self.python(with: "mcp.client.stdio"),
                                       "the `mcp` package is not in the venv named by CAIRN_PYTHON; run the suite with scripts/test")
        let rig = try await ServedDevice()
        defer { rig.stop() }
        let (workspace, device) = (rig.workspace, rig.device)

        let check = try await run(python, [Self.repositoryRoot + "/Tests/Reference/mcp_check.py",
                                           "--cairn", Products.path("cairn"), "--socket", device.socket,
                                           "--query", "boil water", "--expect-id", "boil",
                                           "--dead-socket", workspace.folder + "/no-cairnd.sock"])
        #expect(check.status == 0, "\(check.stdout)\n\(check.stderr)")
        let summary = check.stdout.split(separator: "\n").last.flatMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        } ?? [:]
        #expect(summary["protocol_version"] as? String == "2025-11-25")
        #expect((summary["search_ids"] as? [String])?.first == "boil")
        #expect(summary["bad_request_code"] as? String == "bad_k")
        #expect(summary["unreachable_code"] as? String == "unavailable")
        #expect((summary["freshness"] as? String)?.hasPrefix("Knowledge base version 1") == true)
    }

    @Test("Given a device serving version 1, when the Python client (clients/python) and its LangChain retriever ask it, then status, search, get, the daemon's error codes and an absent socket all come back typed")
    func pythonClient() async throws {
        let python = try requireOrSkip(try await Self.python(with: "langchain_core"),
                                       "langchain-core is not in the venv named by CAIRN_PYTHON; run the suite with scripts/test")
        let rig = try await ServedDevice()
        defer { rig.stop() }
        let (workspace, device) = (rig.workspace, rig.device)

        let check = try await run(python, [Self.repositoryRoot + "/clients/python/tests/check_client.py",
                                           "--socket", device.socket, "--query", "boil water", "--expect-id", "boil",
                                           "--chunk-id", "radio", "--require-langchain"])
        #expect(check.status == 0, "\(check.stdout)\n\(check.stderr)")
        #expect(check.stdout.contains("0 failed") && check.stdout.contains("0 skipped"), "\(check.stdout)")
    }
}
