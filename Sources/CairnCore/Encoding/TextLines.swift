/// The lines of a configuration file's text.
public enum TextLines {
    /// `text` split at LF, CRLF or CR (a file saved on Windows is read line by line as written,
    /// not as one line that a leading `#` would make a comment), without a UTF-8 byte-order mark
    /// at its start; line n is element n − 1.
    public static func of(_ text: String) -> [Substring] {
        let body = text.hasPrefix("\u{FEFF}") ? text.dropFirst() : Substring(text)
        return body.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }
    }
}
