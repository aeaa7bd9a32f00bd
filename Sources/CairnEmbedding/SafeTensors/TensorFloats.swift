/// The floats of one F32 tensor: read in place from its safetensors file's mapping when its
/// bytes are aligned for Float (every view keeps the mapping open), else a copy of its own.
///
/// The encoder holds its weights this way. Their pages are then the page cache's, shared with
/// every process that maps the file and dropped under memory pressure, instead of 80 MB of
/// each process's anonymous memory; a query touches only its tokens' rows of the 47 MB word
/// table, and loading a model copies nothing.
public struct TensorFloats: @unchecked Sendable {
    // @unchecked: the floats are never written after init, and `owner` keeps them alive.
    private let owner: AnyObject
    let base: UnsafePointer<Float>
    public let count: Int

    /// A view of `count` floats at `base`, which `owner` keeps alive.
    init(base: UnsafePointer<Float>, count: Int, owner: AnyObject) {
        (self.base, self.count, self.owner) = (base, count, owner)
    }

    /// A copy of `floats`, held by the view.
    public init(copying floats: [Float]) {
        self = floats.withUnsafeBytes { TensorFloats(copyingBytes: $0) }
    }

    /// A copy of the floats in `bytes` (any alignment), held by the view.
    init(copyingBytes bytes: UnsafeRawBufferPointer) {
        let count = bytes.count / MemoryLayout<Float>.size
        let storage = Storage(count: count)
        if let source = bytes.baseAddress {
            UnsafeMutableRawPointer(storage.floats).copyMemory(from: source, byteCount: count * MemoryLayout<Float>.size)
        }
        self.init(base: storage.floats, count: count, owner: storage)
    }

    /// A copy of `parts`, one after another, held by the view.
    init(stacking parts: [TensorFloats]) {
        let count = parts.reduce(0) { $0 + $1.count }
        let storage = Storage(count: count)
        var filled = 0
        for part in parts {
            (storage.floats + filled).update(from: part.base, count: part.count)
            filled += part.count
        }
        self.init(base: storage.floats, count: count, owner: storage)
    }

    subscript(index: Int) -> Float { base[index] }

    public func withUnsafeBufferPointer<R, E: Error>(_ body: (UnsafeBufferPointer<Float>) throws(E) -> R) throws(E) -> R {
        try body(UnsafeBufferPointer(start: base, count: count))
    }

    private final class Storage {
        let floats: UnsafeMutablePointer<Float>

        init(count: Int) { floats = .allocate(capacity: max(count, 1)) }
        deinit { floats.deallocate() }
    }
}
