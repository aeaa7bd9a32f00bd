import CairnStore
import Foundation

/// How to reach a private repository copy (protocol/data-directory.md, "Private sources"):
/// credentials from files (never from the configuration's text, never logged), a CA bundle for
/// a private certificate authority, and a client certificate for mutual TLS. Every field is a
/// file path; nil leaves libcurl's default.
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

    public init(netrcFile: String? = nil, tokenFile: String? = nil, caBundle: String? = nil,
                clientCertificate: String? = nil, clientKey: String? = nil) {
        self.netrcFile = netrcFile
        self.tokenFile = tokenFile
        self.caBundle = caBundle
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
    }

    /// No credentials, the system's CAs.
    public static let none = SourceAccess()

    /// Sets the field a config key names (`netrc_file`, `token_file`, `ca_bundle`, `client_cert`,
    /// `client_key`).
    public mutating func set(_ key: String, _ path: String) {
        switch key {
        case "netrc_file": netrcFile = path
        case "token_file": tokenFile = path
        case "ca_bundle": caBundle = path
        case "client_cert": clientCertificate = path
        default: clientKey = path
        }
    }

    /// `self`, with each unset field taken from `defaults`.
    public func over(_ defaults: SourceAccess) -> SourceAccess {
        SourceAccess(netrcFile: netrcFile ?? defaults.netrcFile, tokenFile: tokenFile ?? defaults.tokenFile,
                     caBundle: caBundle ?? defaults.caBundle, clientCertificate: clientCertificate ?? defaults.clientCertificate,
                     clientKey: clientKey ?? defaults.clientKey)
    }

    /// Distinguishes kept connections made with different access (`CurlHandles`).
    var handleKey: String {
        [netrcFile, tokenFile, caBundle, clientCertificate, clientKey].map { $0 ?? "" }.joined(separator: "\u{1}")
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
}

extension SourceAccess {
    /// A source URL without its trailing `/`: how sources are compared, keyed (`[source URL]`
    /// sections) and joined with repository paths.
    public static func base(of source: String) -> String {
        source.hasSuffix("/") ? String(source.dropLast()) : source
    }
}
