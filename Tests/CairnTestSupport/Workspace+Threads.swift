public import Foundation

extension Workspace {
    /// A small knowledge base, each chunk with distinct words.
    public static let version1: KB = [
        ("boil", "Boil the water for one minute before you drink it."),
        ("maps", "The flood maps show the safe routes to higher ground."),
        ("storm", "A storm can bring a flood within hours."),
        ("radio", "A crank radio keeps working when the power is out."),
    ]
    /// Its update: one chunk rewritten, one removed, one added.
    public static let version2: KB = [
        ("boil", "Boil the water for one full minute, three at altitude, before you drink it."),
        ("maps", "The flood maps show the safe routes to higher ground."),
        ("radio", "A crank radio keeps working when the power is out."),
        ("sandbag", "Sandbags stacked in a pyramid hold back shallow flood water."),
    ]

    /// `Workspace()` (keygen) on a thread of its own, never blocking a cooperative thread that
    /// in-process servers of other suites need.
    public static func make() async throws -> Workspace {
        try await onThread { try Workspace() }
    }

    /// `publish(_:)` on a thread of its own.
    public func publishOnThread(_ chunks: KB) async throws {
        try await onThread { [self] in try publish(chunks) }
    }
}

/// The common rig of process tests: a workspace with version 1 published, `cairn-server serve`
/// carrying it, and a cairnd (given `environment` and `config` lines) that has installed it.
public final class ServedDevice: @unchecked Sendable {
    // @unchecked: every stored property is a constant.
    public let workspace: Workspace
    public let server: Process
    public let url: String
    public let device: DeviceProcess

    /// `wrapper` starts cairnd through another program (`DeviceProcess`).
    public init(environment: [String: String] = [:], config: [String: String] = [:], wrapper: [String] = []) async throws {
        workspace = try await Workspace.make()
        try await workspace.publishOnThread(Workspace.version1)
        (server, url, _) = try await workspace.serve()
        do {
            device = try DeviceProcess(workspace, sources: [url], config: config, environment: environment, wrapper: wrapper)
        } catch {
            stopProcess(server)
            throw error
        }
        // A device that never serves must not outlive the test that waited for it.
        do { try await device.waitForVersion(1) } catch {
            stop()
            throw error
        }
    }

    public func stop() {
        device.stop()
        stopProcess(server)
    }
}
