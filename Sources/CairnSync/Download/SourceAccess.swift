import CairnCore
import CairnStore
import Foundation

/// How to reach a private repository copy (protocol/data-directory.md, "Private sources"):
/// credentials from files (never from the configuration's text, never logged), a CA bundle for
/// a private certificate authority, a client certificate for mutual TLS, and the proxy on the
/// way (since 2026-12-06). Every field but `proxy` is a file path; nil leaves libcurl's default.
public struct SourceAccess: Sendable, Hashable {
    /// A netrc(5) file: HTTP basic credentials by host.
    public var netrcFile: String?
    /// A file holding a bearer token (surrounding white space ignored), sent as
    /// `Authorization: Bearer …`; libcurl does not send it on to another host after a redirect.
    public var tokenFile: String?
    /// PEM certificates to trust instead of the system's.
    public var caBundle: String?
    /// PEM client certificate and its key, for servers that verify clients.
    public var clientCertificate: String?
    public var clientKey: String?
    /// The proxy to reach the source through (`http://HOST:PORT`, `https://…`, `socks5h://…`),
    /// or `""` for none even where the environment names one (config: `proxy = none`); nil
    /// leaves libcurl's environment (`https_proxy`, `http_proxy`, `all_proxy`, `no_proxy`).
    public var proxy: String?
    /// A file holding `user:password` for a proxy that asks for them (HTTP 407).
    public var proxyAuthFile: String?
    /// PEM certificates to trust for an `https://` proxy instead of the system's.
    public var proxyCABundle: String?

    public init(netrcFile: String? = nil, tokenFile: String? = nil, caBundle: String? = nil,
                clientCertificate: String? = nil, clientKey: String? = nil, proxy: String? = nil,
                proxyAuthFile: String? = nil, proxyCABundle: String? = nil) {
        self.netrcFile = netrcFile
        self.tokenFile = tokenFile
        self.caBundle = caBundle
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
        self.proxy = proxy
        self.proxyAuthFile = proxyAuthFile
        self.proxyCABundle = proxyCABundle
    }

    /// No credentials, the system's CAs.
    public static let none = SourceAccess()

    /// Sets the field a config key names (`netrc_file`, `token_file`, `ca_bundle`, `client_cert`,
    /// `client_key`, `proxy_auth_file`, `proxy_ca_bundle`; `proxy`, whose `none` is stored as `""`).
    public mutating func set(_ key: String, _ value: String) {
        switch key {
        case "netrc_file": netrcFile = value
        case "token_file": tokenFile = value
        case "ca_bundle": caBundle = value
        case "client_cert": clientCertificate = value
        case "proxy": proxy = value == "none" ? "" : value
        case "proxy_auth_file": proxyAuthFile = value
        case "proxy_ca_bundle": proxyCABundle = value
        default: clientKey = value
        }
    }

    /// `self`, with each unset field taken from `defaults`.
    public func over(_ defaults: SourceAccess) -> SourceAccess {
        SourceAccess(netrcFile: netrcFile ?? defaults.netrcFile, tokenFile: tokenFile ?? defaults.tokenFile,
                     caBundle: caBundle ?? defaults.caBundle, clientCertificate: clientCertificate ?? defaults.clientCertificate,
                     clientKey: clientKey ?? defaults.clientKey, proxy: proxy ?? defaults.proxy,
                     proxyAuthFile: proxyAuthFile ?? defaults.proxyAuthFile, proxyCABundle: proxyCABundle ?? defaults.proxyCABundle)
    }

    /// Distinguishes kept connections made with different access (`CurlHandles`).
    var handleKey: String {
        [netrcFile, tokenFile, caBundle, clientCertificate, clientKey, proxy, proxyAuthFile, proxyCABundle].map { $0 ?? "" }
            .joined(separator: "\u{1}")
    }

    /// The configured proxy for messages ("through the proxy …"), nil when none is configured.
    var proxyNamed: String? { proxy.flatMap { $0.isEmpty ? nil : $0 } }

    /// Nil when `value` is usable as `proxy`, else what is wrong with it, one line: `none`, or
    /// `SCHEME://HOST:PORT` with a scheme libcurl proxies through, and no credentials (they go
    /// in `proxy_auth_file`: the config file is read by every client, for `socket`). The port is
    /// required: without one libcurl takes 1080, a SOCKS port, whatever the scheme.
    public static func proxyProblem(_ value: String) -> String? {
        if value == "none" { return nil }
        let schemes = ["http", "https", "socks4", "socks4a", "socks5", "socks5h"]
        // Not shown: what is wrong may be a password, which may hold any character.
        if value.contains("@") {
            return "proxy holds an @, as credentials in a URL do; put user:password in a file named by proxy_auth_file (this file is read by every client)"
        }
        guard let separator = value.range(of: "://"), schemes.contains(value[..<separator.lowerBound].lowercased()) else {
            return "proxy \(value) must be none or start with \(schemes.map { $0 + "://" }.joined(separator: ", "))"
        }
        var authority = value[separator.upperBound...]
        if authority.hasSuffix("/") { authority = authority.dropLast() }
        let port = authority.lastIndex(of: ":").map { authority[authority.index(after: $0)...] } ?? ""
        let host = authority.dropLast(port.count + 1)
        // An IPv6 address in brackets (`[fd00::1]:3128`): bare, its colons read as a port.
        let bracketed = host.hasPrefix("[") && host.hasSuffix("]")
        guard !host.isEmpty, !host.contains(where: { "/?# \t".contains($0) }), bracketed || !host.contains(where: { ":[]".contains($0) }),
              port.allSatisfy({ $0.isASCII && $0.isNumber }), let number = Int(port), (1...65535).contains(number) else {
            return "proxy \(value) must be SCHEME://HOST:PORT, the port given (libcurl would take 1080), an IPv6 address in brackets"
        }
        return nil
    }

    /// The request headers the access adds: the bearer token, read now.
    /// - Throws: `.unauthorized` when the token file cannot be read or is empty (naming the file, not its content).
    func headers() throws(SyncError) -> [String] {
        guard let tokenFile else { return [] }
        let token: String
        do { token = try FileSystem.readText(tokenFile).trimmingCharacters(in: .whitespacesAndNewlines) } catch {
            throw SyncError(.unauthorized, "cannot read token_file \(tokenFile) (\(error.reason))")
        }
        guard !token.isEmpty, !token.contains(where: \.isNewline) else {
            throw SyncError(.unauthorized, "token_file \(tokenFile) must hold one token on one line")
        }
        return ["Authorization: Bearer " + token]
    }

    /// `user:password` for the proxy, read now, as libcurl's `CURLOPT_PROXYUSERPWD` takes it:
    /// each part percent-encoded, since libcurl decodes them (a `%41` in a password would
    /// otherwise be sent as `A`). Nil without `proxyAuthFile`. The file's one line is taken as
    /// it is but for its line end: a password may begin or end with a space.
    /// - Throws: `.unauthorized` when the file cannot be read or does not hold one such line.
    func proxyCredentials() throws(SyncError) -> String? {
        guard let proxyAuthFile else { return nil }
        var line: Substring
        do { line = try FileSystem.readText(proxyAuthFile)[...] } catch {
            throw SyncError(.unauthorized, "cannot read proxy_auth_file \(proxyAuthFile) (\(error.reason))")
        }
        if line.hasSuffix("\n") { line = line.dropLast() }
        if line.hasSuffix("\r") { line = line.dropLast() }
        guard let colon = line.firstIndex(of: ":"), colon != line.startIndex, !line.contains(where: \.isNewline) else {
            throw SyncError(.unauthorized, "proxy_auth_file \(proxyAuthFile) must hold user:password on one line")
        }
        let encode = { (part: Substring) in part.addingPercentEncoding(withAllowedCharacters: Self.unreserved) ?? "" }
        return encode(line[..<colon]) + ":" + encode(line[line.index(after: colon)...])
    }

    /// The proxy login a transfer sends: `proxyCredentials`, whose failure fails the transfer
    /// when cairnd.conf names the proxy; for a proxy the environment may name (or not), a file
    /// that cannot be read is no error until a proxy asks for the login (HTTP 407, which then
    /// says why), so a source that goes direct still works without it.
    func proxyLoginForTransfer() throws(SyncError) -> String? {
        guard proxyNamed == nil else { return try proxyCredentials() }
        return try? proxyCredentials()
    }

    /// RFC 3986's unreserved characters: all a percent-encoded login keeps as it is.
    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}

extension SourceAccess {
    /// A source URL without its trailing `/`: how sources are compared, keyed (`[source URL]`
    /// sections) and joined with repository paths.
    public static func base(of source: String) -> String {
        source.hasSuffix("/") ? String(source.dropLast()) : source
    }
}
