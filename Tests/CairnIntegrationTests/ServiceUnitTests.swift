import CairnTestSupport
import Foundation
import Testing

/// The systemd units shipped in client-config/ and server-config/, checked by systemd itself
/// (`systemd-analyze verify`: unknown keys, bad values, a missing executable), with ExecStart
/// pointed at the built binary.
@Suite("systemd units: systemd-analyze verify finds nothing", .offCooperativePool,
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze"), "systemd-analyze is not installed"))
struct ServiceUnitTests {
    @Test("Given the cairnd and cairn-server units with ExecStart pointing at the built binaries, then systemd-analyze verify exits 0 and prints nothing", arguments: [
        ("client-config/cairnd.service", "cairnd"), ("server-config/cairn-server.service", "cairn-server"),
    ])
    func verifies(unit: String, binary: String) async throws {
        let folder = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let text = try String(contentsOfFile: AgentTests.repositoryRoot + "/" + unit, encoding: .utf8)
        try #require(text.contains("ExecStart=/usr/local/bin/\(binary) "))
        let name = URL(fileURLWithPath: unit).lastPathComponent
        // Quoted: a clone whose path holds a space is one command, as systemd splits it.
        try text.replacingOccurrences(of: "/usr/local/bin/\(binary)", with: "\"" + Binaries.folder + "/" + binary + "\"")
            .write(toFile: folder + "/" + name, atomically: true, encoding: .utf8)
        let verify = try await onThread {
            try Binaries.run("/usr/bin/systemd-analyze", ["verify", folder + "/" + name], in: folder)
        }
        #expect(verify.status == 0 && verify.output.isEmpty && verify.error.isEmpty, "\(verify.output)\(verify.error)")
    }
}
