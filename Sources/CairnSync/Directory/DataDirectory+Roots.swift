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
        persistedChain(pinned: pinned)?.files ?? []
    }

    /// Every key that signed or signs manifests under the chain from `pinned` through the
    /// persisted roots, revoked ones included (`knowManifestSigners`). Reads only: nothing is
    /// persisted, so a read-only data directory gives the same answer.
    public func signingKeysOfChain(pinned: [UInt8]) -> [PublicKey] {
        persistedChain(pinned: pinned)?.chain.everySigningKey ?? []
    }

    /// The chain from `pinned` through the persisted roots until a gap or a file that does not
    /// verify, with each root's bytes; nil when `pinned` is not a root.
    private func persistedChain(pinned: [UInt8]) -> (chain: TrustChain, files: [(version: Int, bytes: [UInt8])])? {
        guard var chain = try? TrustChain(pinned: pinned) else { return nil }
        var files = [(chain.current.version, pinned)]
        while let next = try? FileSystem.read(rootPath(chain.current.version + 1)), (try? chain.accept(next: next)) != nil {
            files.append((chain.current.version, next))
        }
        return (chain, files)
    }

    func rootPath(_ version: Int) -> String { rootsPath + "/" + DataDirectoryLayout.rootFile(version) }
}
