/// A `Range` request header, decided against a representation's size (RFC 9110 §14).
///
/// Served: one range of the forms `bytes=a-b`, `bytes=a-` and `bytes=-n`. A request for
/// several ranges (`bytes=0-1,5-6`) is answered with the full representation (200), which RFC
/// 9110 allows and every client handles. A header in another unit is ignored (200).
enum ByteRange: Equatable {
    /// Serve everything (no usable Range header).
    case full
    /// Serve these bytes with 206.
    case partial(ClosedRange<Int>)
    /// Answer 416 with `Content-Range: bytes */size`: malformed, or not satisfiable.
    case unsatisfiable

    init(header: String?, size: Int) {
        guard let header else { self = .full; return }
        let trimmed = Substring(header).trimmingWhitespace()
        guard trimmed.lowercased().hasPrefix("bytes=") else { self = .full; return }
        let spec = trimmed.dropFirst(6).trimmingWhitespace()
        if spec.contains(",") { self = .full; return }
        guard let dash = spec.firstIndex(of: "-") else { self = .unsatisfiable; return }
        let first = spec[..<dash].trimmingWhitespace()
        let last = spec[spec.index(after: dash)...].trimmingWhitespace()
        switch (Self.number(first), Self.number(last)) {
        case (let a?, let b?) where a <= b && a < size:
            self = .partial(a...min(b, size - 1))
        case (let a?, nil) where last.isEmpty && a < size:
            self = .partial(a...(size - 1))
        case (nil, let n?) where first.isEmpty && n > 0 && size > 0:
            self = .partial(max(0, size - n)...(size - 1))
        default:
            self = .unsatisfiable
        }
    }

    /// Decimal digits only (no sign, no spaces). One of more than 18 digits stands for the
    /// largest Int: a last position past the end means the end, a suffix longer than the file
    /// the whole file, a first position past the end 416 (RFC 9110 §14.1.2; until 2026-12-07 any
    /// such number made the range unsatisfiable).
    private static func number(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        let digits = text.drop { $0 == "0" }
        return digits.isEmpty ? 0 : digits.count <= 18 ? Int(digits) : Int.max
    }
}
