import CairnCore

/// What a request target names. Pure: decides from the raw target text alone, before any file
/// is touched. Only `channels/…`, `blobs/…`, `root/…` and `keys/…` files are ever served; the one
/// non-static route is online search.
enum RequestPath: Equatable, Sendable {
    /// A repository file, by its path relative to the root (no leading `/`).
    case file(RepositoryFile)
    case health
    case metrics
    /// `POST /v1/channels/<c>/search`, online search (the name is checked by the searcher).
    case search(channel: String)
    /// Not a target a well-behaved client sends: `%`-escapes, backslashes, control bytes, empty,
    /// `.` or `..` segments (400). Repository names never need escaping, so refusing every `%`
    /// refuses `%2F`, `%2e%2e` and every other disguise at once.
    case malformed
    /// Well-formed but not a servable file: dotfiles and dot-folders, unknown folders, names
    /// that do not fit the layout (404).
    case notFound

    /// The route kind used as the `kind` label of metrics and logs.
    var kind: String {
        switch self {
        case .file(let file): file.kind.rawValue
        case .health: "health"
        case .metrics: "metrics"
        case .search: "search"
        case .malformed: "malformed"
        case .notFound: "not_found"
        }
    }

    /// Classifies a raw request target such as `/channels/stable/manifest.json?x=1`.
    init(target: String) {
        let path = target.utf8.prefix { $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        guard path.first == UInt8(ascii: "/"),
              path.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "%") && $0 != UInt8(ascii: "\\") })
        else { self = .malformed; return }
        let segments = path.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
            .map { String(decoding: $0, as: UTF8.self) }
        if segments.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) {
            self = .malformed
            return
        }
        if segments.contains(where: { $0.hasPrefix(".") }) { self = .notFound; return }
        self = Self.route(segments)
    }

    private static func route(_ s: [String]) -> RequestPath {
        switch s.count {
        case 1 where s[0] == "healthz": return .health
        case 1 where s[0] == "metrics": return .metrics
        case 4 where s[0] == "v1" && s[1] == "channels" && s[3] == "search": return .search(channel: s[2])
        case 3 where s[0] == "channels" && s[2] == "manifest.json" && Manifest.isValidChannelName(s[1]):
            return .file(RepositoryFile(kind: .manifest, relativePath: s.joined(separator: "/")))
        case 4 where s[0] == "channels" && s[2] == "versions" && Manifest.isValidChannelName(s[1])
            && isVersionFileName(s[3]):
            return .file(RepositoryFile(kind: .version, relativePath: s.joined(separator: "/")))
        case 4 where s[0] == "blobs" && s[1] == "sha256" && isLowerHex(s[3], count: 64) && s[3].hasPrefix(s[2])
            && s[2].utf8.count == 2:
            return .file(RepositoryFile(kind: .blob, relativePath: s.joined(separator: "/"), immutableName: s[3]))
        case 2 where s[0] == "root" && s[1].hasSuffix(".root.json")
            && isVersionFileName(String(s[1].dropLast(".root.json".count)) + ".json"):
            return .file(RepositoryFile(kind: .root, relativePath: s.joined(separator: "/")))
        case 2 where s[0] == "keys" && s[1].utf8.allSatisfy(isKeyNameByte):
            return .file(RepositoryFile(kind: .key, relativePath: s.joined(separator: "/")))
        default:
            return .notFound
        }
    }

    /// `<n>.json`, `n` decimal without leading zeros.
    static func isVersionFileName(_ name: String) -> Bool {
        guard name.hasSuffix(".json") else { return false }
        let digits = name.utf8.dropLast(5)
        return !digits.isEmpty && digits.count <= 19 && digits.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
            && (digits.count == 1 || digits.first != 0x30)
    }

    static func isLowerHex(_ text: String, count: Int) -> Bool {
        text.utf8.count == count && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    static func isKeyNameByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
    }
}

/// A file of the repository that may be served.
struct RepositoryFile: Equatable, Sendable {
    enum Kind: String, Sendable {
        /// `channels/<c>/manifest.json`: mutable, revalidated on every use.
        case manifest
        /// `channels/<c>/versions/<n>.json`: immutable.
        case version
        /// `blobs/sha256/<ab>/<hex>`: immutable, named by its SHA-256.
        case blob
        /// `keys/<name>`: public key files; may be replaced during a key rotation.
        case key
        /// `root/<n>.root.json`: immutable (protocol/root.md).
        case root
    }

    var kind: Kind
    var relativePath: String
    /// The SHA-256 hex a blob is named by, which is also its ETag.
    var immutableName: String? = nil

    var isImmutable: Bool { kind == .version || kind == .blob || kind == .root }

    var contentType: String {
        switch kind {
        case .manifest, .version, .root: "application/json"
        case .blob: "application/octet-stream"
        case .key: "text/plain; charset=utf-8"
        }
    }

    var cacheControl: String { isImmutable ? "public, max-age=31536000, immutable" : "no-cache" }
}
