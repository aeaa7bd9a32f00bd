import CairnCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A read-only, memory-mapped safetensors file.
///
/// Format: an 8-byte little-endian header length N, N bytes of JSON mapping tensor names to
/// `{dtype, shape, data_offsets: [begin, end]}` (offsets relative to the byte after the header),
/// then the tensor bytes. Every entry is validated against the file before anything is read.
public final class SafeTensors: @unchecked Sendable {
    // @unchecked: the mapping is read-only (PROT_READ), never written after init, and unmapped
    // only in deinit, when no one can hold a reference any more.

    public enum DType: String, Sendable {
        case f64 = "F64", f32 = "F32", f16 = "F16", bf16 = "BF16"
        case i64 = "I64", i32 = "I32", i16 = "I16", i8 = "I8", u8 = "U8", bool = "BOOL"

        public var byteSize: Int {
            switch self {
            case .f64, .i64: 8
            case .f32, .i32: 4
            case .f16, .bf16, .i16: 2
            case .i8, .u8, .bool: 1
            }
        }
    }

    public struct TensorInfo: Sendable, Equatable {
        public let dtype: DType
        public let shape: [Int]
        /// Byte range within the file.
        public let byteRange: Range<Int>
        public var elementCount: Int { shape.reduce(1, *) }
    }

    /// The largest header accepted (the format's own limit is 100 MB).
    static let maximumHeaderBytes = 100_000_000

    public let path: String
    public let tensors: [String: TensorInfo]
    private let base: UnsafeRawPointer
    private let mappedSize: Int
    /// The mapping's entry in `MappedFiles`: the encoder reads its weights from it while it serves.
    private let named: Int?

    /// Maps `path` and validates its header. Throws `EmbeddingError` with code
    /// `modelNotFound`, `safetensorsTruncated` or `safetensorsMalformed`.
    public init(path: String) throws(EmbeddingError) {
        self.path = path
        let name = (path as NSString).lastPathComponent
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw EmbeddingError(.modelNotFound, "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw EmbeddingError(.modelNotFound, "cannot stat \(path): \(String(cString: strerror(errno)))")
        }
        let size = Int(info.st_size)
        try Self.checkLength(size, name: name)
        guard let mapping = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), mapping != MAP_FAILED else {
            throw EmbeddingError(.modelNotFound, "cannot map \(path): \(String(cString: strerror(errno)))")
        }
        let base = UnsafeRawPointer(mapping)
        do {
            tensors = try SafeTensors.parseHeader(UnsafeRawBufferPointer(start: base, count: size), name: name)
        } catch {
            munmap(mapping, size)
            throw error
        }
        self.base = base
        self.mappedSize = size
        named = MappedFiles.remember(base, count: size, path: path)
    }

    deinit {
        MappedFiles.forget(named)
        munmap(UnsafeMutableRawPointer(mutating: base), mappedSize)
    }

    private static func checkLength(_ size: Int, name: String) throws(EmbeddingError) {
        guard size >= 8 else {
            throw EmbeddingError(.safetensorsTruncated, "\(name) is \(size) bytes: too short for a safetensors header")
        }
    }

    /// Validates the header of a whole safetensors file held in `file` and returns its tensors,
    /// each checked to lie inside `file`. Reads nothing past `file`, whatever it holds (the
    /// fuzz target `cairn-fuzz safetensors` calls it on arbitrary bytes).
    static func parseHeader(_ file: UnsafeRawBufferPointer, name: String) throws(EmbeddingError) -> [String: TensorInfo] {
        try checkLength(file.count, name: name)
        let base = file.baseAddress!, size = file.count
        var headerLength: UInt64 = 0
        withUnsafeMutableBytes(of: &headerLength) { $0.copyMemory(from: UnsafeRawBufferPointer(start: base, count: 8)) }
        headerLength = UInt64(littleEndian: headerLength)
        guard headerLength <= UInt64(maximumHeaderBytes) else {
            throw EmbeddingError(.safetensorsMalformed, "\(name) is not a safetensors file (header length \(headerLength) is implausible)")
        }
        let dataStart = 8 + Int(headerLength)
        guard dataStart <= size else {
            throw EmbeddingError(.safetensorsTruncated, "\(name) is truncated: header needs \(dataStart) bytes, file has \(size)")
        }
        let headerBytes = Data(bytes: base + 8, count: Int(headerLength))
        guard let object = try? JSONSerialization.jsonObject(with: headerBytes), let entries = object as? [String: Any] else {
            throw EmbeddingError(.safetensorsMalformed, "\(name) is not a safetensors file (its header is not a JSON object)")
        }
        let dataSize = size - dataStart
        var tensors: [String: TensorInfo] = [:]
        for (key, value) in entries where key != "__metadata__" {
            guard let entry = value as? [String: Any],
                  let dtypeName = entry["dtype"] as? String,
                  let shapeValues = entry["shape"] as? [Any],
                  let offsetValues = entry["data_offsets"] as? [Any], offsetValues.count == 2 else {
                throw EmbeddingError(.safetensorsMalformed, "\(name): tensor \(key) lacks dtype, shape or data_offsets")
            }
            guard let dtype = DType(rawValue: dtypeName) else {
                throw EmbeddingError(.safetensorsMalformed, "\(name): tensor \(key) has unknown dtype \(dtypeName)")
            }
            let shape = shapeValues.compactMap { ($0 as? NSNumber)?.intValue }
            let offsets = offsetValues.compactMap { ($0 as? NSNumber)?.intValue }
            guard shape.count == shapeValues.count, shape.allSatisfy({ $0 >= 0 }), offsets.count == 2,
                  offsets[0] >= 0, offsets[0] <= offsets[1] else {
                throw EmbeddingError(.safetensorsMalformed, "\(name): tensor \(key) has an invalid shape or data_offsets")
            }
            let (elements, overflow) = shape.reduce((1, false)) { acc, dim in
                let (product, o) = acc.0.multipliedReportingOverflow(by: dim)
                return (product, acc.1 || o)
            }
            guard !overflow, elements.multipliedReportingOverflow(by: dtype.byteSize).overflow == false,
                  elements * dtype.byteSize == offsets[1] - offsets[0] else {
                throw EmbeddingError(.safetensorsMalformed, "\(name): tensor \(key) shape \(shape) does not match its \(offsets[1] - offsets[0]) bytes")
            }
            guard offsets[1] <= dataSize else {
                // Relative to the data section: `dataStart + offsets[1]` can overflow (seen with cairn-fuzz).
                throw EmbeddingError(.safetensorsTruncated, "\(name) is truncated: tensor \(key) ends at data byte \(offsets[1]), the data section has \(dataSize)")
            }
            tensors[key] = TensorInfo(dtype: dtype, shape: shape, byteRange: (dataStart + offsets[0])..<(dataStart + offsets[1]))
        }
        let ranges = tensors.values.map(\.byteRange).filter { !$0.isEmpty }.sorted { $0.lowerBound < $1.lowerBound }
        for (previous, next) in zip(ranges, ranges.dropFirst()) where previous.upperBound > next.lowerBound {
            throw EmbeddingError(.safetensorsMalformed, "\(name): two tensors overlap at byte \(next.lowerBound)")
        }
        return tensors
    }

    /// The F32 tensor `name`, checked to have `shape`: read in place from the mapping (no copy)
    /// when its bytes are aligned for Float, else a copy. The view keeps the mapping open.
    public func tensor(_ name: String, shape: [Int]) throws(EmbeddingError) -> TensorFloats {
        guard let info = tensors[name] else {
            throw EmbeddingError(.tensorMissing, "\((path as NSString).lastPathComponent) has no tensor \(name)")
        }
        guard info.dtype == .f32, info.shape == shape else {
            throw EmbeddingError(.tensorMismatch, "tensor \(name) is \(info.dtype.rawValue) \(info.shape), expected F32 \(shape)")
        }
        let start = base + info.byteRange.lowerBound
        if Int(bitPattern: start) % MemoryLayout<Float>.alignment == 0 {
            return TensorFloats(base: start.assumingMemoryBound(to: Float.self), count: info.elementCount, owner: self)
        }
        return TensorFloats(copyingBytes: UnsafeRawBufferPointer(start: start, count: info.byteRange.count))
    }
}
