public import Foundation

/// The base URL of a repository copy, as cairnd takes it (`--source`, `source =`): `http://` or
/// `https://` with a host, or `file://` with an absolute path; no white space or control
/// characters (libcurl refuses a URL with a space, so a folder's name is percent-encoded).
public enum SourceURL {
    /// The `file://` URL of the folder at the absolute `path`, percent-encoded (a stick mounted
    /// as `/media/USB STICK` gives `file:///media/USB%20STICK`).
    public static func forFolder(_ path: String) -> String {
        "file://" + (path.addingPercentEncoding(withAllowedCharacters: pathCharacters) ?? path)
    }

    /// Whether `url` is an `https://` URL (the scheme in any case, as `problem` accepts it).
    public static func isHTTPS(_ url: String) -> Bool { url.lowercased().hasPrefix("https://") }

    /// Whether `url` is an `http://` or `https://` URL: a server, not a `file://` folder.
    public static func isHTTP(_ url: String) -> Bool { isHTTPS(url) || url.lowercased().hasPrefix("http://") }

    /// The local path a `file://` URL names, percent-decoded (the inverse of `forFolder`); nil
    /// for any other URL.
    public static func filePath(_ url: String) -> String? {
        guard url.lowercased().hasPrefix("file://") else { return nil }
        let encoded = String(url.dropFirst(7))
        return encoded.removingPercentEncoding ?? encoded
    }

    /// `text` with the password of every `scheme://user:password@host` in it replaced by `***`
    /// (and a user without a password, `scheme://token@host`, too). A source may carry its
    /// credentials (`https://user:pass@host/repo`, accepted, though `netrc_file` is where they
    /// belong); status, the socket's errors and the log show it through this, since the
    /// socket's group and the journal's readers are not the config file's.
    ///
    /// After each `://` the URL runs to white space; its userinfo is what comes before its last
    /// `@`: `user:password` when the user holds no `/ ? #` and what follows the `:` is not a
    /// port (digits, then `/ ? #`), else a lone token when it holds none of `/ ? # [`. So a
    /// password with `/ ? # ' "` in it (not percent-encoded) is hidden whole, and a host's port,
    /// an IPv6 host, a path or query with an `@` in it (`/a@b`, `?owner=ops@example.org`) are
    /// left alone.
    public static func redactingPasswords(in text: String) -> String {
        guard text.contains("@"), text.contains("://") else { return text }
        var result = ""
        var rest = Substring(text)
        let beyondAuthority: (Character) -> Bool = { "/?#".contains($0) }
        while let marker = rest.range(of: "://") {
            result += rest[..<marker.upperBound]
            rest = rest[marker.upperBound...]
            let end = rest.firstIndex { $0.isWhitespace } ?? rest.endIndex
            guard let at = rest[..<end].lastIndex(of: "@") else { continue }
            let userinfo = rest[..<at]
            if let colon = userinfo.firstIndex(of: ":") {
                let user = userinfo[..<colon], secret = userinfo[userinfo.index(after: colon)...]
                let digits = secret.prefix { $0.isASCII && $0.isNumber }
                let port = !digits.isEmpty && secret.dropFirst(digits.count).first.map(beyondAuthority) == true
                guard !user.contains(where: beyondAuthority), !user.hasPrefix("["), !port else { continue }
                result += user + ":***"
            } else {
                // A user alone may be a token (`https://TOKEN@host`): all of it goes.
                guard !userinfo.contains(where: { beyondAuthority($0) || $0 == "[" }) else { continue }
                result += "***"
            }
            rest = rest[at...]
        }
        return result + rest
    }

    /// What a path may hold unencoded in a URL: RFC 3986's unreserved characters, `/`, and the
    /// sub-delimiters and `:@` that a path segment allows; `%`, `?`, `#` and spaces are encoded.
    private static let pathCharacters = CharacterSet(charactersIn:
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/!$&'()*+,;=:@")

    /// Nil when `source` is a usable base URL, else what is wrong with it and what to write
    /// instead, as one line.
    public static func problem(_ source: String) -> String? {
        let lowered = source.lowercased()
        if source.hasPrefix("/") {
            return "source \(source) is a folder, not a URL; write it as \(forFolder(source))"
        }
        if source.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F }) {
            if lowered.hasPrefix("file:///") {
                let folder = String(source.dropFirst(7))
                return "source \"\(source)\" holds white space; percent-encode it: \(forFolder(folder.removingPercentEncoding ?? folder))"
            }
            return "source \"\(source)\" holds white space or a control character; percent-encode it (a space is %20)"
        }
        for scheme in ["http://", "https://"] where lowered.hasPrefix(scheme) {
            let rest = source.dropFirst(scheme.count)
            guard let first = rest.first, first != "/", first != "?", first != "#" else {
                return "source \(source) names no host; write \(scheme)HOST[:PORT]/PATH"
            }
            // cairnd appends the repository's paths (channels/…, blobs/…) to the base: a query
            // (a storage account's signed token) would end up before them, and every request
            // would be refused as if the file were missing.
            if rest.contains(where: { $0 == "?" || $0 == "#" }) {
                return "source \(source) holds a query or fragment (? or #); cairnd appends the repository's paths to it, so give the folder's URL alone (a bearer token goes in token_file)"
            }
            return nil
        }
        if lowered.hasPrefix("file://") {
            guard source.dropFirst(7).first == "/" else {
                return "source \(source) is not an absolute file:// URL; a folder is file:// followed by its absolute path, like file:///media/usb/repo"
            }
            if source.contains(where: { $0 == "?" || $0 == "#" }) {
                let folder = String(source.dropFirst(7))
                return "source \(source) holds ? or #, which a URL does not take as part of a folder's name; percent-encode it: \(forFolder(folder.removingPercentEncoding ?? folder))"
            }
            return nil
        }
        return "source \(source) must start with http://, https:// or file://"
    }
}
