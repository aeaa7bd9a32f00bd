import Crypto
import _CryptoExtras
import Foundation

/// A hash of a version's set of leaves that a change updates in time proportional to the change
/// (protocol/state-root.md, "Set hash"): LtHash16, 1,024 lanes of 16 bits, each leaf expanded
/// to 2,048 bytes by AES-256-CTR keyed with the leaf and added lane by lane modulo 2^16;
/// removing a leaf subtracts the same expansion. The digest is
/// SHA-256("cairn-set-hash-v1\n" ‖ u64be(n) ‖ the lanes, little-endian).
public struct SetHash: Sendable, Equatable {
    public static let lanes = 1024
    static let domain = Array("cairn-set-hash-v1\n".utf8)
    private static let zeros = Data(count: 2 * lanes)
    private static let nonce = try! AES._CTR.Nonce(nonceBytes: [UInt8](repeating: 0, count: 16))

    private var sums = [UInt16](repeating: 0, count: SetHash.lanes)

    /// The empty set's.
    public init() {}

    /// The hash of `leaves` (any order).
    public init<S: Sequence>(leaves: S) where S.Element == ContentID {
        for leaf in leaves { add(leaf) }
    }

    /// Adds one leaf.
    public mutating func add(_ leaf: ContentID) { leaf.bytes.withUnsafeBytes { add(leaf: $0) } }

    /// Adds one leaf's 32 bytes.
    public mutating func add(leaf: UnsafeRawBufferPointer) { combine(leaf, subtracting: false) }

    /// Removes one leaf's 32 bytes (the inverse of `add`).
    public mutating func remove(leaf: UnsafeRawBufferPointer) { combine(leaf, subtracting: true) }

    /// Adds another set's hash (the union of two disjoint sets).
    public mutating func add(_ other: SetHash) {
        for lane in 0..<Self.lanes { sums[lane] &+= other.sums[lane] }
    }

    /// SHA-256 of the domain, `count` (the set's size) and the lanes.
    public func digest(count: Int) -> ContentID {
        var hasher = SHA256()
        hasher.update(data: Self.domain)
        withUnsafeBytes(of: UInt64(count).bigEndian) { hasher.update(bufferPointer: $0) }
        sums.map(\.littleEndian).withUnsafeBytes { hasher.update(bufferPointer: $0) }
        return ContentID(bytes: Array(hasher.finalize()))!
    }

    private mutating func combine(_ leaf: UnsafeRawBufferPointer, subtracting: Bool) {
        precondition(leaf.count == 32, "a leaf is 32 bytes")
        // The key is a SHA-256 output (the leaf), so nothing about it can be chosen but through
        // the hash; AES-256-CTR from a zero counter block is the expansion (2,048 bytes).
        let stream = try! AES._CTR.encrypt(Self.zeros, using: SymmetricKey(data: leaf), nonce: Self.nonce)
        stream.withUnsafeBytes { raw in
            sums.withUnsafeMutableBufferPointer { sums in
                for lane in 0..<Self.lanes {
                    let value = UInt16(raw[2 * lane]) | UInt16(raw[2 * lane + 1]) << 8
                    if subtracting { sums[lane] &-= value } else { sums[lane] &+= value }
                }
            }
        }
    }
}
