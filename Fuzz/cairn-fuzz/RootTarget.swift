import CairnCore
#if canImport(Glibc)
import Glibc
#endif

extension FuzzTarget {
    /// Root 1 of the repository the seed `vector-root-2.json` continues (protocol/vectors/root-chain.json).
    static let pinnedRoot: TrustChain? = {
        guard let path = FuzzSeeds.rootChainFile, let bytes = FuzzSeeds.read(path) else { return nil }
        return try? TrustChain(pinned: bytes)
    }()

    /// A root file and the chain walk (protocol/root.md): the strict root schema, the envelope,
    /// both thresholds. Properties: a root that parses re-encodes to a root equal to it; a root
    /// accepted as the next step after the pinned root 1 has version 2 and is signed by a
    /// threshold of root 1's root keys; and a file accepted on its own still verifies after
    /// re-encoding.
    static let root = FuzzTarget(name: "root") { input in
        let bytes = Array(input)
        if let decoded = try? SignedRoot.decode(bytes) {
            require((try? RootMetadata(json: decoded.root.canonicalJSON)) == decoded.root, "a parsed root does not survive re-encoding")
        }
        if let alone = try? SignedRoot.verifySelfSigned(bytes) {
            require(alone.rootThreshold <= alone.rootKeys.count, "an accepted root has a threshold above its keys")
        }
        guard var chain = pinnedRoot else { return }
        let trusted = chain.current
        if let next = try? chain.accept(next: bytes) {
            require(next.version == trusted.version + 1, "the walk accepted a root that is not the next version")
            let envelope = try? SignedRoot.decode(bytes).envelope
            let old = envelope?.validSigners(among: trusted.rootKeys, domain: SignedRoot.domain).count ?? 0
            require(old >= trusted.rootThreshold, "the walk accepted a root without the old root keys' threshold")
            _ = chain.policy
        }
    }
}

/// The seed corpus's paths, for targets that need a fixed trusted value beside the input.
enum FuzzSeeds {
    /// `Fuzz/Corpus/root/vector-root-1.json`, found from the working directory (scripts/fuzz runs
    /// from the repository's root).
    static var rootChainFile: String? { "Fuzz/Corpus/root/vector-root-1.json" }

    static func read(_ path: String) -> [UInt8]? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count <= 0 { break }
            bytes += buffer.prefix(count)
        }
        return bytes
    }
}
