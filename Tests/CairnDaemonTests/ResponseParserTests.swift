@testable import CairnClient
import Testing

/// The client's HTTP answer parser, fed the bytes a peer on the socket might send (a
/// misdirected `--socket`, a proxy): a bad length is refused in one line, never a trap.
@Suite("Parsing cairnd's answers")
struct ResponseParserTests {
    static func answer(_ head: String, _ body: String = "") -> [UInt8] { Array((head + "\r\n\r\n" + body).utf8) }

    @Test("Given a Content-Length that is negative, signed or not a number, or a chunk size that is negative or overflows, then parsing refuses with protocol_violation and a well-formed answer of each kind parses",
          arguments: [
            answer("HTTP/1.1 200 OK\r\nContent-Length: -1", "{}"),
            answer("HTTP/1.1 200 OK\r\nContent-Length: +2", "{}"),
            answer("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999", "{}"),
            answer("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", "-1\r\n{}\r\n0\r\n\r\n"),
            answer("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", "7fffffffffffffff\r\n{}\r\n0\r\n\r\n"),
            answer("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", "ffffffffffffffffffff\r\n{}\r\n0\r\n\r\n"),
          ])
    func badLengthsRefused(bytes: [UInt8]) throws {
        do {
            _ = try HTTPResponseParser.parse(bytes)
            Issue.record("a bad length was taken")
        } catch {
            #expect(error.code == .protocolViolation && !error.message.contains("\n"), "\(error)")
        }
        #expect(try HTTPResponseParser.parse(Self.answer("HTTP/1.1 200 OK\r\nContent-Length: 2", "{}")).body == Array("{}".utf8))
        #expect(try HTTPResponseParser.parse(Self.answer("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", "2\r\n{}\r\n0\r\n\r\n")).body
                == Array("{}".utf8))
    }
}
