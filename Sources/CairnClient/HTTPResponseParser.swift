/// Parses one HTTP/1.1 response: status line, headers, and a body delimited by
/// `Content-Length`, chunked encoding, or the end of the stream.
enum HTTPResponseParser {
    static let separator: [UInt8] = Array("\r\n\r\n".utf8)

    static func headerEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i
        }
        return nil
    }

    /// Whether `bytes` hold a whole response with a known length (else read to end of stream).
    static func isComplete(_ bytes: [UInt8]) -> Bool {
        guard let end = headerEnd(bytes), let (_, headers) = try? head(bytes[..<end]),
              let length = headers["content-length"].flatMap(length(_:)) else { return false }
        return bytes.count - (end + 4) >= length
    }

    /// A `Content-Length` value: decimal digits only (no sign), at most 18 of them; nil
    /// otherwise (the answer is then read to the end of the stream, and `parse` refuses it).
    static func length(_ text: String) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ (48...57).contains($0) }) else { return nil }
        return Int(text)
    }

    /// `bodiless`: the answer to a HEAD request, whose `Content-Length` is the GET's and which
    /// has no body.
    static func parse(_ bytes: [UInt8], bodiless: Bool = false) throws(ClientError) -> UnixHTTPClient.Response {
        guard let end = headerEnd(bytes) else { throw violation("the answer has no complete header") }
        let (status, headers) = try head(bytes[..<end])
        var body = Array(bytes[(end + 4)...])
        if bodiless {
            body = []
        } else if let declared = headers["content-length"] {
            guard let length = length(declared) else { throw violation("the answer's Content-Length is not a number of bytes") }
            guard body.count >= length else { throw violation("the answer's body is shorter than its Content-Length") }
            body = Array(body.prefix(length))
        } else if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            body = try dechunk(body)
        }
        return UnixHTTPClient.Response(status: status, headers: headers, body: body)
    }

    static func head(_ bytes: ArraySlice<UInt8>) throws(ClientError) -> (Int, [String: String]) {
        let lines = String(decoding: bytes, as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ", maxSplits: 2)
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let status = Int(statusParts[1]) else {
            throw violation("the answer does not start with an HTTP/1.x status line")
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (status, headers)
    }

    static func dechunk(_ bytes: [UInt8]) throws(ClientError) -> [UInt8] {
        var output: [UInt8] = [], index = 0
        while true {
            let digits = { (line: ArraySlice<UInt8>) in
                line.prefix { $0 != UInt8(ascii: ";") }.allSatisfy { (48...57).contains($0) || (65...70).contains($0) || (97...102).contains($0) }
            }
            guard let lineEnd = (index..<max(index, bytes.count - 1)).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }),
                  digits(bytes[index..<lineEnd]),
                  let size = Int(String(decoding: bytes[index..<lineEnd], as: UTF8.self)
                    .split(separator: ";").first ?? "", radix: 16) else {
                throw violation("the answer's chunked body is malformed")
            }
            let start = lineEnd + 2
            if size == 0 { return output }
            guard size <= bytes.count - start else { throw violation("the answer's chunked body is truncated") }
            output += bytes[start..<(start + size)]
            index = start + size + 2
        }
    }

    static func violation(_ message: String) -> ClientError { ClientError(.protocolViolation, message) }
}

import Foundation
