import ArgumentParser

struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync", abstract: "Ask cairnd to poll its sources now (returns at once; see `cairn status`).")

    @OptionGroup var connection: ConnectionOptions
    @ParentCommand var root: CairnCommand

    func run() async throws {
        _ = try DaemonConnection(root: root.connection, local: connection).call("POST", "/v1/sync", body: [])
        print("sync requested; `cairn status` shows the outcome")
    }
}
