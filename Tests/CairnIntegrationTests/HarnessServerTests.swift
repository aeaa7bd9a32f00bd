import CairnTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The harness that starts nginx and moto on a port it picks: a port taken between the pick and
/// the server's bind (by another test's server, in the parallel suite) must not pass for a
/// started server, or the test talks to a stranger (a CI run once got 501 from the fault server
/// where it expected moto).
@Suite("Harness: a server started on a picked port is the one that answers", .offCooperativePool)
struct HarnessServerTests {
    @Test("a command that outlives its deadline is killed and the test told, not left to hang the run")
    func deadlineKills() async throws {
        let folder = try TemporaryDirectory.make()
        #expect(throws: ProcessTimedOut.self) { try Binaries.run("/bin/sleep", ["600"], in: folder, seconds: 0.5) }
        await #expect(throws: ProcessTimedOut.self) { try await run("/bin/sleep", ["600"], seconds: 0.5) }
        #expect(try Binaries.run("/bin/true", [], in: folder, seconds: 60).status == 0)
    }

    @Test("a listener is credited to the process that holds it, not to another on the port")
    func listenerOwner() throws {
        let held = try TCPListener()
        defer { held.close() }
        #expect(holdsListener(getpid(), port: held.port))
        #expect(!holdsListener(getppid(), port: held.port))
    }

    @Test("a server whose picked port was taken is started again on another port")
    func takenPortRetried() throws {
        try requireOrSkip(FaultServer.available, "python3 is not installed (apt-get install python3)")
        let folder = try TemporaryDirectory.make()
        // Given the first port handed out is one this process already listens on.
        let taken = try TCPListener()
        defer { taken.close() }
        var handedOut: [Int] = []
        let (server, port) = try startOnFreePort(seconds: 20, ports: {
            handedOut.append(handedOut.isEmpty ? taken.port : freePort())
            return handedOut.last!
        }) { port in
            try launch("/usr/bin/python3", ["-m", "http.server", "--bind", "127.0.0.1", String(port), "--directory", folder],
                       logDirectory: folder)
        }
        defer { stopProcess(server) }
        // Then the first launch failed to bind and exited, and the server runs on the second port.
        #expect(handedOut.count == 2 && handedOut.first == taken.port)
        #expect(port == handedOut.last && port != taken.port)
        #expect(holdsListener(server.processIdentifier, port: port))
    }
}
