extension JSONParser {
    /// `-?(0|[1-9][0-9]*)` fitting in Int64; a fraction or exponent is refused.
    mutating func integer() throws(CoreError) -> Int64 {
        let start = index
        let negative = peek == UInt8(ascii: "-")
        if negative { index += 1 }
        guard let first = peek, first >= UInt8(ascii: "0"), first <= UInt8(ascii: "9") else {
            throw failure("expected a digit")
        }
        var magnitude: UInt64 = 0
        if first == UInt8(ascii: "0") {
            index += 1
        } else {
            while let digit = peek, digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") {
                let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times10.addingReportingOverflow(UInt64(digit - UInt8(ascii: "0")))
                guard !overflow1, !overflow2, sum <= UInt64(Int64.max) + 1 else {
                    index = start
                    throw failure("integer out of range")
                }
                magnitude = sum
                index += 1
            }
        }
        if let next = peek, next == UInt8(ascii: ".") || next == UInt8(ascii: "e") || next == UInt8(ascii: "E") {
            index = start
            throw failure("floating-point numbers are not allowed")
        }
        if let next = peek, next >= UInt8(ascii: "0"), next <= UInt8(ascii: "9") {
            throw failure("leading zeros are not allowed")
        }
        if negative { return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude) }
        guard magnitude <= UInt64(Int64.max) else {
            index = start
            throw failure("integer out of range")
        }
        return Int64(magnitude)
    }

    /// A quoted string: escapes decoded, control characters refused, UTF-8 validated.
    mutating func string() throws(CoreError) -> String {
        let start = index
        index += 1
        var out: [UInt8] = []
        while true {
            guard let byte = peek else { throw failure("unterminated string") }
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: out, as: UTF8.self) else {
                    index = start
                    throw failure("string is not valid UTF-8")
                }
                return text
            case UInt8(ascii: "\\"):
                try escape(into: &out)
            case 0..<0x20:
                index -= 1
                throw failure("unescaped control character in string")
            default:
                out.append(byte)
            }
        }
    }

    private mutating func escape(into out: inout [UInt8]) throws(CoreError) {
        guard let byte = peek else { throw failure("unterminated escape") }
        index += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(byte)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = UInt32(try hex4())
            if (0xD800..<0xDC00).contains(scalar) {
                guard bytes.count - index >= 2, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                    throw failure("unpaired surrogate escape")
                }
                index += 2
                let low = UInt32(try hex4())
                guard (0xDC00..<0xE000).contains(low) else { throw failure("unpaired surrogate escape") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw failure("unpaired surrogate escape") }
            out.append(contentsOf: UTF8.encode(unicode)!)
        default:
            throw failure("invalid escape")
        }
    }

    private mutating func hex4() throws(CoreError) -> UInt16 {
        guard bytes.count - index >= 4 else { throw failure("truncated \\u escape") }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let nibble: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = c - UInt8(ascii: "A") + 10
            default: throw failure("invalid hex digit in \\u escape")
            }
            value = value << 4 | UInt16(nibble)
            index += 1
        }
        return value
    }
}
