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

    public init(netrcFile: String? = nil, tokenFile: String? = nil, caBundle: String? = nil,
                clientCertificate: String? = nil, clientKey: String? = nil, proxy: String? = nil,
                proxyAuthFile: String? = nil) {
        self.netrcFile = netrcFile
        self.tokenFile = tokenFile
        self.caBundle = caBundle
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
        self.proxy = proxy
        self.proxyAuthFile = proxyAuthFile
    }

    /// No credentials, the system's CAs.
    public static let none = SourceAccess()

    /// Sets the field a config key names (`netrc_file`, `token_file`, `ca_bundle`, `client_cert`,
    /// `client_key`, `proxy_auth_file`; `proxy`, whose `none` is stored as `""`).
    public mutating func set(_ key: String, _ value: String) {
        switch key {
        case "netrc_file": netrcFile = value
        case "token_file": tokenFile = value
        case "ca_bundle": caBundle = value
        case "client_cert": clientCertificate = value
        case "proxy": proxy = value == "none" ? "" : value
        case "proxy_auth_file": proxyAuthFile = value
        default: clientKey = value
        }
    }

    /// `self`, with each unset field taken from `defaults`.
    public func over(_ defaults: SourceAccess) -> SourceAccess {
        SourceAccess(netrcFile: netrcFile ?? defaults.netrcFile, tokenFile: tokenFile ?? defaults.tokenFile,
                     caBundle: caBundle ?? defaults.caBundle, clientCertificate: clientCertificate ?? defaults.clientCertificate,
                     clientKey: clientKey ?? defaults.clientKey, proxy: proxy ?? defaults.proxy,
                     proxyAuthFile: proxyAuthFile ?? defaults.proxyAuthFile)
    }

    /// Distinguishes kept connections made with different access (`CurlHandles`).
    var handleKey: String {
        [netrcFile, tokenFile, caBundle, clientCertificate, clientKey, proxy, proxyAuthFile].map { $0 ?? "" }
            .joined(separator: "\u{1}")
    }

    /// The configured proxy for messages ("through the proxy …"), nil when none is configured.
    var proxyNamed: String? { proxy.flatMap { $0.isEmpty ? nil : $0 } }

    /// Nil when `value` is usable as `proxy`, else what is wrong with it, one line: `none`, or
    /// `SCHEME://HOST[:PORT]` with a scheme libcurl proxies through, and no credentials (they
    /// go in `proxy_auth_file`: the config file is read by every client, for `socket`).
    public static func proxyProblem(_ value: String) -> String? {
        if value == "none" { return nil }
        let schemes = ["http", "https", "socks4", "socks4a", "socks5", "socks5h"]
        guard let separator = value.range(of: "://"), schemes.contains(value[..<separator.lowerBound].lowercased()) else {
            return "proxy \(SourceURL.redactingPasswords(in: value)) must be none or start with \(schemes.map { $0 + "://" }.joined(separator: ", "))"
        }
        let authority = value[separator.upperBound...].prefix { $0 != "/" }
        if authority.contains("@") {
            return "proxy \(SourceURL.redactingPasswords(in: value)) holds credentials; put user:password in a file named by proxy_auth_file (this file is read by every client)"
        }
        if authority.isEmpty || authority.hasPrefix(":") || value.contains(where: { $0.isWhitespace || $0 == "?" || $0 == "#" }) {
            return "proxy \(value) names no host, or holds white space, ? or #; write SCHEME://HOST:PORT"
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

    /// `user:password` for the proxy, read now; nil without `proxyAuthFile`.
    /// - Throws: `.unauthorized` when the file cannot be read or does not hold one such line.
    func proxyCredentials() throws(SyncError) -> String? {
        guard let proxyAuthFile else { return nil }
        let line: String
        do { line = try FileSystem.readText(proxyAuthFile).trimmingCharacters(in: .whitespacesAndNewlines) } catch {
            throw SyncError(.unauthorized, "cannot read proxy_auth_file \(proxyAuthFile) (\(error.reason))")
        }
        guard line.contains(":"), !line.contains(where: \.isNewline) else {
            throw SyncError(.unauthorized, "proxy_auth_file \(proxyAuthFile) must hold user:password on one line")
        }
        return line
    }
}

extension SourceAccess {
    /// A source URL without its trailing `/`: how sources are compared, keyed (`[source URL]`
    /// sections) and joined with repository paths.
    public static func base(of source: String) -> String {
        source.hasSuffix("/") ? String(source.dropLast()) : source
    }
}
