@testable import CairnEmbedding

extension FuzzTarget {
    /// The safetensors header parser on the whole file (as `SafeTensors(path:)` sees it once
    /// mapped). Property: every tensor it returns lies inside the file and its size matches its
    /// dtype and shape; its bytes are then read, so AddressSanitizer checks the bounds too.
    static let safeTensors = FuzzTarget(name: "safetensors") { file in
        guard let tensors = try? SafeTensors.parseHeader(file, name: "fuzz.safetensors") else { return }
        for info in tensors.values {
            require(info.byteRange.lowerBound >= 8 && info.byteRange.upperBound <= file.count, "a tensor lies outside the file")
            require(info.elementCount * info.dtype.byteSize == info.byteRange.count, "a tensor's size does not match its shape")
            var sum: UInt8 = 0
            for byte in UnsafeRawBufferPointer(rebasing: file[info.byteRange]) { sum &+= byte }
            _ = sum
        }
    }
}
