import CairnCore
import CairnEmbedding
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Vectors computed elsewhere (`cairn-server publish --vectors FILE.npy`): a NumPy `.npy` file
/// (format versions 1–3) of little-endian float32 or float16, C order, shape (n, d), row i
/// being the i-th chunk of the source in reading order. Read a row at a time (`pread`), so a
/// million rows cost neither the publisher's heap nor its resident mapped pages.
final class SuppliedVectors: @unchecked Sendable {
    // @unchecked: the descriptor is only read with pread (no shared offset); closed in deinit.
    let path: String
    let rows: Int
    let dimension: Int
    /// Bytes per value: 4 (float32) or 2 (float16).
    private let width: Int
    private let descriptor: Int32
    private let dataOffset: Int

    init(path: String) throws(PublishError) {
        self.path = path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw PublishError(.io, "cannot read --vectors \(path): \(String(cString: strerror(errno)))") }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            close(fd)
            throw PublishError(.io, "cannot stat --vectors \(path)")
        }
        let size = Int(info.st_size)
        var head = [UInt8](repeating: 0, count: min(size, 1 << 16))
        let read = head.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard size > 0, read == head.count else {
            close(fd)
            throw PublishError(.badInput, "\(path): empty or unreadable; --vectors takes a NumPy .npy file of shape (chunks, dimension)")
        }
        let parsed = head.withUnsafeBytes { bytes in Result { () throws(NPYHeader.Problem) in try NPYHeader(bytes) } }
        guard case .success(let header) = parsed else {
            close(fd)
            if case .failure(let problem) = parsed { throw PublishError(.badInput, "\(path): \(problem.message)") }
            throw PublishError(.badInput, "\(path): not a NumPy .npy file")
        }
        (rows, dimension, width, dataOffset) = (header.rows, header.columns, header.width, header.dataOffset)
        // A shape whose bytes overflow is refused as any other that the file's size does not hold.
        let (cells, cellsOverflow) = rows.multipliedReportingOverflow(by: dimension)
        let (bytes, bytesOverflow) = cells.multipliedReportingOverflow(by: width)
        let (expected, expectedOverflow) = bytes.addingReportingOverflow(dataOffset)
        guard !cellsOverflow, !bytesOverflow, !expectedOverflow, expected == size else {
            close(fd)
            let needs = cellsOverflow || bytesOverflow || expectedOverflow ? "more bytes than a file can hold" : "\(expected) bytes"
            throw PublishError(.badInput, "\(path): shape (\(rows), \(dimension)) needs \(needs), the file has \(size)")
        }
        descriptor = fd
    }

    deinit {
        close(descriptor)
    }

    /// Row `index` as float32 values (all zero if the file cannot be read there whole: refused
    /// by the caller's check of each row's norm). A row read short (the file cut by a `np.save`
    /// into it meanwhile) was part zero, a norm above zero, and published scaled.
    func row(_ index: Int) -> [Float] {
        var bytes = [UInt8](repeating: 0, count: dimension * width)
        let offset = off_t(dataOffset + index * dimension * width)
        let read = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, offset) }
        guard read == bytes.count else { return [Float](repeating: 0, count: dimension) }
        return bytes.withUnsafeBytes { start in
            if width == 4 {
                var vector: [Float] = []
                VectorBytes.decode(start, into: &vector)
                return vector
            }
            return (0..<dimension).map {
                Float(Float16(bitPattern: UInt16(littleEndian: start.loadUnaligned(fromByteOffset: $0 * 2, as: UInt16.self))))
            }
        }
    }
}

/// The header of a `.npy` file: magic `\x93NUMPY`, a version, a little-endian header length
/// (2 bytes in version 1, 4 in versions 2 and 3), then a Python dict literal such as
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (1000, 384), }` padded with spaces.
struct NPYHeader {
    struct Problem: Error {
        let message: String
    }

    let rows: Int
    let columns: Int
    let width: Int
    let dataOffset: Int

    init(_ bytes: UnsafeRawBufferPointer) throws(Problem) {
        let magic: [UInt8] = [0x93] + Array("NUMPY".utf8)
        guard bytes.count >= 10, Array(bytes.prefix(6)) == magic else {
            throw Problem(message: "not a NumPy .npy file (no \\x93NUMPY magic); save the array with numpy.save")
        }
        let major = bytes[6]
        let lengthBytes = major == 1 ? 2 : 4
        guard [1, 2, 3].contains(major), bytes.count >= 8 + lengthBytes else {
            throw Problem(message: ".npy format version \(major) is not one of 1, 2, 3")
        }
        let length = (0..<lengthBytes).reduce(0) { $0 | Int(bytes[8 + $1]) << (8 * $1) }
        dataOffset = 8 + lengthBytes + length
        guard dataOffset <= bytes.count else { throw Problem(message: "the .npy header is cut short") }
        let text = String(decoding: bytes[(8 + lengthBytes)..<dataOffset], as: UTF8.self)

        guard let descr = Self.value(of: "descr", in: text) else { throw Problem(message: "the .npy header has no 'descr'") }
        switch descr {
        case "'<f4'": width = 4
        case "'<f2'": width = 2
        default:
            throw Problem(message: "dtype \(descr) is not little-endian float32 or float16 ('<f4', '<f2'); convert with astype('<f4')")
        }
        guard Self.value(of: "fortran_order", in: text) == "False" else {
            throw Problem(message: "the array is in Fortran order; save numpy.ascontiguousarray(vectors)")
        }
        guard let shape = Self.value(of: "shape", in: text), shape.hasPrefix("("), shape.hasSuffix(")") else {
            throw Problem(message: "the .npy header has no 'shape'")
        }
        let dimensions = shape.dropFirst().dropLast().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        guard dimensions.count == 2, let rows = Int(dimensions[0]), let columns = Int(dimensions[1]), rows > 0, columns > 0 else {
            throw Problem(message: "shape \(shape) is not (chunks, dimension)")
        }
        (self.rows, self.columns) = (rows, columns)
    }

    /// The literal after `'key':` up to the next top-level comma or closing brace.
    static func value(of key: String, in text: String) -> String? {
        guard let range = text.range(of: "'\(key)':") else { return nil }
        var depth = 0
        var result = ""
        for character in text[range.upperBound...] {
            if character == "(" { depth += 1 }
            if character == ")" { depth -= 1 }
            if depth == 0 && (character == "," || character == "}") { break }
            result.append(character)
            if depth < 0 { return nil }
        }
        return result.trimmingCharacters(in: .whitespaces)
    }
}

extension SuppliedVectors {
    /// The rows a publish re-embeds to check the file: `sample` rows, all when fewer, drawn by a
    /// generator seeded from the file (`sampleSeed`), so that publishing the same file again
    /// checks the same rows and a refusal repeats (with `Int.random` a file with a few wrong
    /// rows could be refused once and pass the next time).
    func sampleRows(_ sample: Int) -> Set<Int> {
        guard sample < rows else { return Set(0..<rows) }
        var generator = SplitMix64(seed: sampleSeed())
        var chosen = Set<Int>()
        while chosen.count < sample { chosen.insert(Int.random(in: 0..<rows, using: &generator)) }
        return chosen
    }

    /// SHA-256 of the header and of 256 rows spread evenly through the file (all rows when
    /// fewer), its first eight bytes: another file almost always gives another seed, and
    /// reading it costs a few hundred `pread`s at any size.
    func sampleSeed() -> UInt64 {
        var hasher = ContentID.Hasher()
        var header = [UInt8](repeating: 0, count: dataOffset)
        _ = header.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        header.withUnsafeBytes { hasher.update($0) }
        let spread = min(rows, 256)
        var bytes = [UInt8](repeating: 0, count: dimension * width)
        for step in 0..<spread {
            let index = step * rows / spread
            bytes.withUnsafeMutableBytes { buffer in
                buffer.initializeMemory(as: UInt8.self, repeating: 0)
                _ = pread(descriptor, buffer.baseAddress, buffer.count, off_t(dataOffset + index * dimension * width))
                hasher.update(UnsafeRawBufferPointer(buffer))
            }
        }
        return hasher.finalize().bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The publisher's checks, made after a pass over the source and before anything is written
    /// (the repository, the embedding cache): one row per chunk (`chunks` read), the model's dimension, and each
    /// `sampled` row (its chunk's id and embedding text) within cosine 0.999 of what the shipped
    /// model gives that text. The refusal names the worst row.
    func verify(sampled: [(row: Int, id: String, text: String)], chunks: Int, embedder: SentenceEmbedder,
                dimension: Int) throws(PublishError) {
        guard rows == chunks else {
            throw PublishError(.badInput, "\(path): \(rows) rows for \(chunks) chunks; row i must be the i-th chunk of the source in reading order")
        }
        try check(dimension: dimension)
        var worst: (row: Int, id: String, cosine: Float)?
        for start in stride(from: 0, to: sampled.count, by: 32) {
            let batch = Array(sampled[start..<min(start + 32, sampled.count)])
            let reference = embedder.embed(batch.map(\.text))
            for (item, expected) in zip(batch, reference) {
                let cosine = SentenceEmbedder.cosine(row(item.row), expected)
                if worst == nil || !(cosine >= worst!.cosine) { worst = (item.row, item.id, cosine) }
            }
        }
        if let worst, !(worst.cosine >= Self.minimumCosine) {
            throw PublishError(.badInput, "\(path): row \(worst.row) (chunk \"\(worst.id)\") has cosine \(String(format: "%.4f", worst.cosine)) with the shipped model's vector for its text, below \(Self.minimumCosine) (the worst of \(sampled.count) rows checked): these vectors come from another model or another chunk order; nothing was published")
        }
    }

    /// The file's vectors must have the model's dimension.
    func check(dimension: Int) throws(PublishError) {
        guard self.dimension == dimension else {
            throw PublishError(.badInput, "\(path): vectors of dimension \(self.dimension); the model gives \(dimension)")
        }
    }

    /// Each sampled row must be at least this close to the shipped model's vector.
    static let minimumCosine: Float = 0.999
}
