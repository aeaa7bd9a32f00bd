import CairnCore
import CairnStore
import Foundation

extension Repository {
    /// `channels/<channel>/.pruned`: the highest version of the channel whose blobs
    /// `cairn-server prune` may have removed, in decimal (protocol/repository.md). A dotfile:
    /// the publisher's own record, never served nor copied to a bucket.
    public func prunedPath(_ channel: String) -> String { channelFolder(channel) + "/.pruned" }

    /// The highest pruned version of `channel`, 0 when none was ever pruned (or the file does
    /// not read: then every version is checked whole, as before any prune).
    public func prunedThrough(_ channel: String) -> Int {
        guard let text = try? FileSystem.readText(prunedPath(channel)),
              let number = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), number >= 0 else { return 0 }
        return number
    }

    /// Records that the versions of `channel` up to `version` are pruned (atomically, fsynced):
    /// written before any of their blobs goes, so that a prune killed halfway leaves `verify`
    /// saying "pruned", never "missing".
    func recordPruned(_ channel: String, through version: Int) throws(PublishError) {
        let path = prunedPath(channel)
        do { try FileSystem.writeAtomically(Array("\(version)\n".utf8), to: path) } catch {
            throw PublishError(.io, "cannot write \(path): \(error.message)", cause: error)
        }
    }

    /// The manifest in the signed manifest file at `path`, its signatures not checked: what a
    /// file names is kept whoever signed it, which can only keep more.
    func unverifiedManifest(at path: String) throws(PublishError) -> Manifest {
        let bytes: [UInt8]
        do { bytes = try FileSystem.read(path) } catch { throw PublishError(.io, "cannot read \(path): \(error.message)", cause: error) }
        do { return try Manifest(json: SignedManifest.decodeEnvelope(bytes).content) } catch {
            throw PublishError(.repositoryCorrupt, "\(path) is not a signed manifest file (\(error))", cause: error)
        }
    }
}
