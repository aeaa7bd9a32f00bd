import ArgumentParser
import CairnEmbedding
import CairnCommandLine
import Foundation

struct EmbedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "embed",
        abstract: "Embed texts with the local model, or print the cosine similarity of two texts.",
        discussion: """
            Prints a JSON array with one 384-float unit vector per TEXT, or with --similarity the \
            cosine of the first two texts. Use it to check the model on a device: \
            `cairn embed --similarity "The weather is lovely today." "It's so sunny outside!"` \
            prints 0.6660 for all-MiniLM-L6-v2.

            The model folder is --model-dir, else $CAIRN_MODEL_DIR, else \
            ~/.cache/cairn/all-MiniLM-L6-v2 (filled by scripts/fetch-model).
            """
    )

    @Flag(help: "Print the cosine similarity of the first two texts instead of the vectors.")
    var similarity = false

    @Option(help: "Folder with model.safetensors, vocab.txt and config.json.")
    var modelDir: String?

    @Argument(help: "The texts to embed.")
    var texts: [String]

    func validate() throws {
        if similarity && texts.count != 2 {
            throw ValidationError("--similarity takes exactly two texts")
        }
        if texts.isEmpty { throw ValidationError("give at least one TEXT") }
    }

    func run() async throws {
        let embedder = try loadEmbedder(modelDir)
        let vectors = embedder.embed(texts)
        if similarity {
            print(String(format: "%.4f", SentenceEmbedder.cosine(vectors[0], vectors[1])))
        } else {
            let json = try JSONSerialization.data(withJSONObject: vectors.map { $0.map(Double.init) })
            print(String(decoding: json, as: UTF8.self))
        }
    }
}

/// Loads the model or ends the command with one line saying what is wrong (exit 66, as
/// `cairn eval`: 3 means cairnd cannot be reached).
func loadEmbedder(_ directory: String?) throws -> SentenceEmbedder {
    let path = directory ?? SentenceEmbedder.defaultDirectory()
    do {
        return try SentenceEmbedder(directory: path)
    } catch {
        writeStandardError("cairn: \(error.message) (model folder \(path); run scripts/fetch-model)\n")
        throw ExitCode(66)
    }
}
