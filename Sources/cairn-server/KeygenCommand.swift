import ArgumentParser
import CairnCore
import CairnPublish

struct KeygenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Create an Ed25519 key pair (a signing key or a root key).",
        discussion: """
            Writes DIR/NAME.key (the Ed25519 private key, mode 0600: keep it secret, keep it \
            off the repository) and DIR/NAME.pub (the public key: devices pin it with \
            --trusted-key, or a root lists it: cairn-server root). NAME defaults to publisher. \
            Refuses to overwrite either file. Prints the key id.
            """
    )

    @Option(help: "Folder for NAME.key and NAME.pub (created if missing).")
    var out: String
    @Option(help: "File name of the pair, without extension.")
    var name = "publisher"

    func run() throws {
        do throws(PublishError) {
            let key = try KeyFiles.generate(in: out, name: name)
            print("wrote \(out)/\(name).key (0600) and \(out)/\(name).pub; key id \(key.keyID)")
        } catch {
            throw fail(error)
        }
    }
}
