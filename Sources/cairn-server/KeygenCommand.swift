import ArgumentParser
import CairnCore
import CairnPublish
import Foundation

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
            if let repository = Self.repository(holding: out) {
                throw PublishError(.keyExposed, "\(out) is inside the repository \(repository), whose files are copied to servers and sticks; write the key pair elsewhere (publish writes keys/*.pub there itself)")
            }
            let key = try KeyFiles.generate(in: out, name: name)
            print("wrote \(out)/\(name).key (0600) and \(out)/\(name).pub; key id \(key.keyID)")
        } catch {
            throw fail(error)
        }
    }

    /// The repository (a folder holding `.publish.lock`, or both `channels/` and `blobs/`) that
    /// `folder` is in or is, from its nearest existing ancestor (resolved by the kernel, links
    /// and `..` alike) up; nil when none.
    static func repository(holding folder: String) -> String? {
        var path = folder.hasPrefix("/") ? folder : FileManager.default.currentDirectoryPath + "/" + folder
        var resolved: String?
        while resolved == nil {
            if let real = realpath(path, nil) {
                resolved = String(cString: real)
                free(real)
            } else {
                let parent = (path as NSString).deletingLastPathComponent
                guard parent != path else { return nil }
                path = parent
            }
        }
        var current = resolved!
        func isFolder(_ path: String) -> Bool {
            var isFolder: ObjCBool = false
            return FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) && isFolder.boolValue
        }
        while true {
            if FileManager.default.fileExists(atPath: current + "/.publish.lock")
                || isFolder(current + "/channels") && isFolder(current + "/blobs") {
                return current
            }
            guard current != "/" else { return nil }
            current = (current as NSString).deletingLastPathComponent
        }
    }
}
