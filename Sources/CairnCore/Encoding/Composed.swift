import Foundation

extension String {
    /// This text in NFC (canonical composition): "한" as one scalar, not its jamo; "が", not "か"
    /// and a combining mark. The index compares bytes, so the publisher stores chunk text so and
    /// a device searches with its query so. ASCII text, which NFC leaves as it is, is returned
    /// without the Foundation call (a query's path).
    public var composed: String {
        utf8.allSatisfy { $0 < 0x80 } ? self : precomposedStringWithCanonicalMapping
    }
}
