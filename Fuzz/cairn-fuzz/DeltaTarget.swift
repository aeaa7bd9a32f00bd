import CairnCore

extension FuzzTarget {
    /// The binary delta decoder. Property: the decoder accepts only what the encoder writes, so
    /// a delta that decodes re-encodes to exactly the input bytes.
    static let delta = FuzzTarget(name: "delta") { input in
        let bytes = Array(input)
        guard let delta = try? Delta.decode(bytes) else { return }
        require(delta.encoded == bytes, "a decoded delta does not re-encode to its input")
    }
}
