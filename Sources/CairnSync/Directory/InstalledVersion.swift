public import CairnCore
import CairnStore

/// A fully installed, verified version: what `current` points at.
public struct InstalledVersion: Sendable, Equatable {
    public let version: Int
    public let stateRoot: ContentID
    /// `DIR/versions/<n>`.
    public let directory: String
    /// The manifest it was installed from (verified at install time).
    public let manifest: Manifest
    /// `DIR/versions/<n>/model` when the version has a usable model, else nil (lexical-only).
    public let modelDirectory: String?

    /// `DIR/versions/<n>/index.sqlite`.
    public var indexPath: String { directory + "/" + DataDirectoryLayout.indexFile }
    /// `DIR/versions/<n>/manifest.json`.
    public var manifestPath: String { directory + "/" + DataDirectoryLayout.manifestFile }
    /// `DIR/versions/<n>/snapshot.blob`: present when the version was installed from its full snapshot.
    public var snapshotBlobPath: String { directory + "/" + DataDirectoryLayout.snapshotBlobFile }

    public init(version: Int, stateRoot: ContentID, directory: String, manifest: Manifest, modelDirectory: String?) {
        self.version = version
        self.stateRoot = stateRoot
        self.directory = directory
        self.manifest = manifest
        self.modelDirectory = modelDirectory
    }

    /// The keys among `keys` whose signatures on its manifest file verify; nil when the file
    /// does not read as a signed manifest.
    public func signers(among keys: [PublicKey]) -> Set<KeyID>? {
        guard let bytes = try? FileSystem.read(manifestPath), let envelope = try? SignedManifest.decodeEnvelope(bytes) else { return nil }
        return envelope.validSigners(among: keys, domain: SignedManifest.domain)
    }

    /// The version a signed manifest file (verified when installed) describes, outside any
    /// folder (`directory` empty, no model), or nil when the bytes hold none.
    public init?(signedManifest bytes: [UInt8]) {
        guard let manifest = DataDirectory.parseInstalledManifest(bytes) else { return nil }
        self.init(version: manifest.version, stateRoot: manifest.stateRoot, directory: "", manifest: manifest, modelDirectory: nil)
    }
}
