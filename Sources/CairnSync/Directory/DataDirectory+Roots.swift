public import CairnCore
import CairnStore
import Foundation

extension DataDirectory {
    /// `DIR/roots`.
    public var rootsPath: String { path + "/" + DataDirectoryLayout.rootsFolder }

    /// The trust chain from the pinned root through every root persisted in `DIR/roots/`, each
    /// verified again as a step (protocol/root.md, "The chain walk"). A persisted file that is
    /// missing or does not verify ends the chain there (the walk fetches the rest again); the
    /// pinned root is persisted when it is newer than every persisted one.
    /// - Throws: `.rootRefused` when `pinned` itself is not a well-formed, self-signed root.
    public func trustChain(pinned: [UInt8]) throws(SyncError) -> TrustChain {
        var chain: TrustChain
        do { chain = try TrustChain(pinned: pinned) } catch {
            throw SyncError(.rootRefused, "the pinned root is not acceptable: \(error.message)", cause: error)
        }
        if !FileSystem.exists(rootPath(chain.current.version)) {
            // Not fatal: the chain works from memory, and the pinned root is the owner's file anyway.
            do { try persistRoot(pinned, version: chain.current.version) } catch {
                logger.warning("cannot persist the pinned root; exports will lack it until it can be written: \(error)")
            }
        }
        while let bytes = try? FileSystem.read(rootPath(chain.current.version + 1)) {
            do { try chain.accept(next: bytes) } catch {
                logger.warning("a persisted root does not verify; the chain walk will fetch it again",
                               metadata: ["cairn.sync.root": "\(chain.current.version + 1)", "cairn.sync.error": "\(error)"])
                break
            }
        }
        return chain
    }

    /// Writes `DIR/roots/<n>.root.json` atomically (before the next chain step is taken).
    public func persistRoot(_ bytes: [UInt8], version: Int) throws(SyncError) {
        do {
            try FileSystem.makeDirectory(rootsPath)
            try FileSystem.writeAtomically(bytes, to: rootPath(version))
        } catch {
            throw SyncError.writing("cannot persist root \(version) in \(rootsPath): \(error.reason)", error)
        }
    }

    /// The pinned root and the persisted roots that chain from it, ascending, until a gap or a
    /// file that does not verify: what an export hands on (a device pinned to the same root
    /// walks them from the export alone).
    func persistedRoots(pinned: [UInt8]) -> [(version: Int, bytes: [UInt8])] {
        guard var chain = try? TrustChain(pinned: pinned) else { return [] }
        var roots = [(chain.current.version, pinned)]
        while let next = try? FileSystem.read(rootPath(chain.current.version + 1)), (try? chain.accept(next: next)) != nil {
            roots.append((chain.current.version, next))
        }
        return roots
    }

    func rootPath(_ version: Int) -> String { rootsPath + "/" + DataDirectoryLayout.rootFile(version) }
}
