import ArgumentParser

@main
struct CairnCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cairn",
        abstract: "The Cairn command line: query a device's knowledge base, check the model.",
        subcommands: [EmbedCommand.self]
    )
}
