import ArgumentParser
import CairnCore
import CairnPublish

struct KeygenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Create a publisher signing key.",
        discussion: """
            Writes DIR/publisher.key (the Ed25519 private key, mode 0600: keep it secret, keep it \
            off the repository) and DIR/publisher.pub (the public key devices pin with \
            --trusted-key). Refuses to overwrite either file. Prints the key id.
            """
    )

    @Option(help: "Folder for publisher.key and publisher.pub (created if missing).")
    var out: String

    func run() throws {
        do throws(PublishError) {
            let key = try KeyFiles.generate(in: out)
            print("wrote \(out)/publisher.key (0600) and \(out)/publisher.pub; key id \(key.keyID)")
        } catch {
            throw fail(error)
        }
    }
}
