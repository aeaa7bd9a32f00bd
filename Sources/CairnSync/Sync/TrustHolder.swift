public import CairnCore
import Synchronization

/// The device's trust chain as the syncer last left it, shared with the status side; nil for a
/// device pinned to keys (or whose pinned root is not acceptable).
public final class TrustHolder: Sendable {
    private let chain: Mutex<TrustChain?>

    public init(_ chain: TrustChain?) { self.chain = Mutex(chain) }

    public var current: TrustChain? { chain.withLock { $0 } }

    func set(_ value: TrustChain) { chain.withLock { $0 = value } }
}
