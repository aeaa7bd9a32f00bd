public import CairnCore
import Foundation

/// The content-addressed part of a repository: `blobs/sha256/<ab>/<abcdef…>`, each file named by
/// the SHA-256 of its bytes, written once and never modified (protocol/repository.md).
public struct BlobStore: Sendable {
    /// The repository root (the folder holding `blobs/` and `channels/`).
    public let root: String

    public init(root: String) {
        self.root = root
    }

    /// The relative path of a blob inside a repository, as in URLs: `blobs/sha256/ab/abcdef…`.
    public static func relativePath(of id: ContentID) -> String {
        let hex = id.hex
        return "blobs/sha256/\(hex.prefix(2))/\(hex)"
    }

    public func path(of id: ContentID) -> String {
        root + "/" + Self.relativePath(of: id)
    }

    public func contains(_ id: ContentID) -> Bool {
        FileSystem.exists(path(of: id))
    }

    /// Whether the blob is present whole: `size` bytes that hash to `id`. One cut short or
    /// grown (an interrupted copy or restore of the repository), or of the right size with other
    /// bytes (zeroes from a crash, a flipped bit), is not: the next `put` writes it again, rather
    /// than every later manifest naming a blob no device can install. Reads the blob once.
    func holds(_ id: ContentID, size: Int64) -> Bool {
        var info = stat()
        guard stat(path(of: id), &info) == 0, info.st_mode & S_IFMT == S_IFREG, Int64(info.st_size) == size else { return false }
        return (try? FileSystem.sha256(of: path(of: id)).id) == id
    }

    /// What a `put` did: wrote a blob that was absent, found it whole, or wrote again a file of
    /// its name that was not (`holds`), which a cache or CDN in front of the repository may still
    /// hold.
    public enum Stored: Sendable, Equatable {
        case written, present, repaired
    }

    /// What a `put` of blob `id` of `size` bytes is to do: nothing (`present` whole), write it
    /// (`written`: absent), or write it again (`repaired`: any other entry of its name, a
    /// dangling link included, which a cache may hold as it is).
    func finding(_ id: ContentID, size: Int64) -> Stored {
        var info = stat()
        guard lstat(path(of: id), &info) == 0 else { return .written }
        return holds(id, size: size) ? .present : .repaired
    }

    /// Stores `bytes` under their SHA-256 and returns it; a blob already present at its size is
    /// not rewritten.
    @discardableResult
    public func put(_ bytes: [UInt8]) throws(StoreError) -> ContentID {
        try store(bytes).id
    }

    /// Stores `bytes` under their SHA-256, as `put` does, and says what it did.
    public func store(_ bytes: [UInt8]) throws(StoreError) -> (id: ContentID, stored: Stored) {
        let id = ContentID(hashing: bytes)
        let found = finding(id, size: Int64(bytes.count))
        if found == .present { return (id, found) }
        let hex = id.hex
        let folder = root + "/blobs/sha256/\(hex.prefix(2))"
        try FileSystem.makeDirectory(folder)
        try FileSystem.writeAtomically(bytes, to: path(of: id))
        return (id, found)
    }

    /// The blob's bytes, checked against its name: a corrupt file is an error, never data.
    public func get(_ id: ContentID) throws(StoreError) -> [UInt8] {
        let bytes = try FileSystem.read(path(of: id))
        guard ContentID(hashing: bytes) == id else {
            throw StoreError(.hashMismatch, "blob \(id.hex.prefix(12))… does not match its SHA-256")
        }
        return bytes
    }
}
