import ArgumentParser
import CairnCore
import CairnPublish
import Foundation

/// `cairn-server root init | rotate | show`: the repository's root of trust (protocol/root.md).
struct RootCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "root",
        abstract: "Write, rotate and show the repository's root of trust.",
        discussion: """
            A root lists the root keys (they sign only the next root: keep them offline) with their \
            threshold, and the signing keys (they sign manifests) with theirs. Devices pin a root \
            (cairnd --trusted-root REPO/root/1.root.json) and follow every rotation from any copy \
            of the repository. Exit status: 0 written; 64 bad option or key file; 77 the keys given \
            do not meet a threshold (nothing written); 74 I/O error or a broken chain.
            """,
        subcommands: [Init.self, Rotate.self, Show.self]
    )

    struct Init: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "init", abstract: "Write root 1, signed by its root keys.")

        @Option(help: "The repository folder (created if missing).")
        var repo: String
        @Option(name: .customLong("root-key"), parsing: .upToNextOption, help: "Root private key files (each signs root 1).")
        var rootKey: [String] = []
        @Option(name: .customLong("root-threshold"), help: "Root keys that must sign a rotation.")
        var rootThreshold = 1
        @Option(name: .customLong("signing-key"), parsing: .upToNextOption, help: "Public key files of the keys that sign manifests.")
        var signingKey: [String] = []
        @Option(help: "Signing keys that must sign a manifest.")
        var threshold = 1
        @Option(name: .customLong("expires-days"), help: "Days until the root expires.")
        var expiresDays = 365

        func run() throws {
            followRepositoryReadability(repo)
            do throws(PublishError) {
                let root = try RootPublisher.initialize(
                    repository: Repository(root: repo), rootKeys: try loadPrivate(rootKey, outside: repo), rootThreshold: rootThreshold,
                    signingKeys: try loadPublic(signingKey), signingThreshold: threshold, expiresDays: expiresDays)
                print("wrote \(repo)/root/1.root.json: \(RootCommand.describe(root))")
            } catch {
                throw fail(error)
            }
        }
    }

    struct Rotate: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate",
            abstract: "Write the next root: keys added or removed, thresholds changed.",
            discussion: """
                Signed by --sign-with keys: a threshold of the current root's root keys and a \
                threshold of the new root's must be among them. Removing a signing key revokes it: \
                manifests it signed no longer count on devices, and a device that installed a \
                version only it signed recovers (protocol/root.md).
                """)

        @Option(help: "The repository folder.")
        var repo: String
        @Option(name: .customLong("sign-with"), parsing: .upToNextOption, help: "Root private key files that sign the new root.")
        var signWith: [String] = []
        @Option(name: .customLong("add-root-key"), help: "A public key file to add as a root key (repeatable).")
        var addRootKey: [String] = []
        @Option(name: .customLong("remove-root-key"), help: "A public key file to remove from the root keys (repeatable).")
        var removeRootKey: [String] = []
        @Option(name: .customLong("root-threshold"), help: "The new root threshold.")
        var rootThreshold: Int?
        @Option(name: .customLong("add-signing-key"), help: "A public key file to add as a signing key (repeatable).")
        var addSigningKey: [String] = []
        @Option(name: .customLong("remove-signing-key"), help: "A public key file to remove (revoke) as a signing key (repeatable).")
        var removeSigningKey: [String] = []
        @Option(help: "The new signing threshold.")
        var threshold: Int?
        @Option(name: .customLong("expires-days"), help: "Days until the new root expires.")
        var expiresDays = 365

        func run() throws {
            followRepositoryReadability(repo)
            do throws(PublishError) {
                var rotation = RootPublisher.Rotation()
                rotation.addRootKeys = try loadPublic(addRootKey)
                rotation.removeRootKeys = try loadPublic(removeRootKey)
                rotation.rootThreshold = rootThreshold
                rotation.addSigningKeys = try loadPublic(addSigningKey)
                rotation.removeSigningKeys = try loadPublic(removeSigningKey)
                rotation.signingThreshold = threshold
                rotation.expiresDays = expiresDays
                let root = try RootPublisher.rotate(repository: Repository(root: repo), signWith: try loadPrivate(signWith, outside: repo),
                                                    rotation: rotation)
                print("wrote \(repo)/root/\(root.version).root.json: \(RootCommand.describe(root))")
            } catch {
                throw fail(error)
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show", abstract: "Check the root chain and show the newest root.")

        @Option(help: "The repository folder.")
        var repo: String
        @Flag(help: "Print the newest root's JSON (as signed) with the chain's versions.")
        var json = false

        func run() throws {
            do throws(PublishError) {
                guard let chain = try Repository(root: repo).rootChain() else {
                    throw PublishError(.invalidArgument, "\(repo) has no root (cairn-server root init writes root 1)")
                }
                let root = chain.current
                if json {
                    let document = CanonicalJSON.object([
                        "root": root.canonicalJSON, "chain": .array(chain.roots.map { .integer(Int64($0.version)) }),
                    ])
                    print(String(decoding: document.bytes, as: UTF8.self))
                } else {
                    print("root \(root.version) of \(repo), chain 1…\(root.version) verified")
                    print("created     \(root.created), expires \(root.expires)")
                    print("root keys   \(root.rootThreshold) of \(root.rootKeys.map(\.keyID.hex).joined(separator: ", "))")
                    print("signing     \(root.signingThreshold) of \(root.signingKeys.map(\.keyID.hex).joined(separator: ", "))")
                }
            } catch {
                throw fail(error)
            }
        }
    }

    static func describe(_ root: RootMetadata) -> String {
        "root keys \(root.rootThreshold) of \(root.rootKeys.count), signing keys \(root.signingThreshold) of "
            + "\(root.signingKeys.count) (\(root.signingKeys.map(\.keyID.hex).joined(separator: ", "))), expires \(root.expires)"
    }
}
