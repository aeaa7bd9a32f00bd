public import CairnCore
import CairnStore
import Foundation

/// The publisher's key files on disk (protocol/keys.md): `publisher.key` (mode 0600) and
/// `publisher.pub`.
public enum KeyFiles {
    /// Creates a new key in `folder` as `<name>.key` and `<name>.pub`; refuses to replace
    /// either file.
    public static func generate(in folder: String, name: String = "publisher") throws(PublishError) -> PublisherKey {
        guard !name.isEmpty, !name.hasPrefix("."), !name.contains("/") else {
            throw PublishError(.invalidArgument, "a key name must be a plain file name (no '/', not starting with '.')")
        }
        let privatePath = folder + "/\(name).key", publicPath = folder + "/\(name).pub"
        for path in [privatePath, publicPath] where FileSystem.exists(path) {
            throw PublishError(.invalidArgument, "\(path) already exists; refusing to overwrite a key")
        }
        let key = PublisherKey.generate()
        do {
            try FileSystem.makeDirectory(folder)
            try FileSystem.writeAtomically(Array(key.fileText.utf8), to: privatePath, mode: 0o600)
            try FileSystem.writeAtomically(Array(key.publicKey.fileText.utf8), to: publicPath, mode: 0o644)
        } catch {
            throw PublishError(.io, "cannot write the key files: \(error.message)", cause: error)
        }
        return key
    }

    /// The private key in the file at `path`.
    public static func loadPrivate(_ path: String) throws(PublishError) -> PublisherKey {
        do { return try PublisherKey(fileText: try text(path)) } catch let error as CoreError {
            throw PublishError(.invalidArgument, "\(path): \(error.message)", cause: error)
        } catch let error as PublishError { throw error } catch { throw PublishError(.io, "cannot read \(path)") }
    }

    /// The public key in the file at `path`.
    public static func loadPublic(_ path: String) throws(PublishError) -> PublicKey {
        do { return try PublicKey(fileText: try text(path)) } catch let error as CoreError {
            throw PublishError(.invalidArgument, "\(path): \(error.message)", cause: error)
        } catch let error as PublishError { throw error } catch { throw PublishError(.io, "cannot read \(path)") }
    }

    /// The file's text; when it cannot be read, one line with the reason and, for a missing
    /// file, how keys are made.
    private static func text(_ path: String) throws(PublishError) -> String {
        do { return String(decoding: try FileSystem.read(path), as: UTF8.self) } catch {
            let reason = String(cString: strerror(error.errno ?? EIO))
            throw PublishError(.io, "cannot read the key file \(path) (\(reason))"
                               + (error.code == .notFound ? "; cairn-server keygen --out DIR [--name NAME] makes DIR/NAME.key and DIR/NAME.pub" : ""),
                               cause: error)
        }
    }
}
