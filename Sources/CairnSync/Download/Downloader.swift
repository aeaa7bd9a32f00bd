import CairnCore
import CairnStore
import CCurl
import Foundation
public import Logging

/// What a manifest poll found.
public enum ManifestFetch: Sendable {
    /// 304: the manifest has the ETag sent.
    case notModified
    /// The manifest file's bytes and the ETag they came with (none from file:// or servers without).
    case fetched(bytes: [UInt8], etag: String?)
}

/// Fetches manifests and blobs over libcurl: http(s) and file://, with time, speed, redirect
/// and size limits, conditional GET for the manifest and resumable blob downloads.
public struct Downloader: Sendable {
    public let limits: TransferLimits
    let logger: Logger
    /// This downloader's kept handles and their connections.
    let handles = CurlHandles()

    public init(limits: TransferLimits = TransferLimits(), logger: Logger) {
        self.limits = limits
        self.logger = logger
    }

    /// For a `file://` URL: nil when the file is absent (libcurl then says so) or a regular file
    /// this process can read; else the refusal. libcurl would open a FIFO on a stick and wait
    /// for a writer for ever (the attempt, and every other source, stuck behind it), read a
    /// device file without end, and take an unreadable root file for "no more roots".
    /// `size`: the file's signed size, which a copy of another size is refused for (libcurl
    /// gives `file://` no length to check a resume by).
    static func localFileProblem(_ url: String, what: String, size: Int64? = nil) -> SyncError? {
        guard let path = SourceURL.filePath(url) else { return nil }
        var info = stat()
        guard stat(path, &info) == 0 else { return errno == ENOENT || errno == ENOTDIR ? nil : SyncError(.io, "cannot read the \(what) \(path): \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFREG else {
            return SyncError(.io, "the \(what) \(path) is not a regular file (a FIFO, a device or a folder); the source is unusable until it is replaced")
        }
        guard Glibc.access(path, R_OK) == 0 else {
            return SyncError(.io, "cannot read the \(what) \(path): \(String(cString: strerror(errno)))")
        }
        if let size, Int64(info.st_size) != size { return wrongSize(Int64(info.st_size), size, what: what) }
        return nil
    }

    /// The limits a manifest or root transfer runs under: the whole transfer bounded by
    /// `effectiveSmallFileSeconds` (a blob's is not: a snapshot over a slow link takes hours).
    var smallFileLimits: TransferLimits {
        var small = limits
        small.overallTimeout = small.overallTimeout == 0 ? limits.effectiveSmallFileSeconds
            : min(small.overallTimeout, limits.effectiveSmallFileSeconds)
        return small
    }

    /// A manifest or root transfer that timed out once its whole time limit had passed (not at
    /// the connect timeout, nor cut by the low-speed limit, which curl reports the same way).
    private func checkSmallFileTime(_ outcome: CurlOutcome, started: ContinuousClock.Instant, what: String) throws(SyncError) {
        let limit = smallFileLimits.overallTimeout
        guard outcome.code == CURLE_OPERATION_TIMEDOUT, ContinuousClock.now - started >= .seconds(limit) - .milliseconds(250) else { return }
        throw SyncError(.network, "the \(what) did not arrive within \(limit) s (the source sends it too slowly)")
    }

    /// The request headers that ask every cache on the way to check its copy with the origin.
    static let revalidation = ["Cache-Control: no-cache", "Pragma: no-cache"]

    /// GETs a manifest, sending `If-None-Match: etag` when given; at most `maxManifestBytes`.
    /// `revalidate`: the request asks every cache on the way to check its copy with the origin.
    public func fetchManifest(url: String, etag: String?, access: SourceAccess = .none,
                              revalidate: Bool = false) async throws(SyncError) -> (ManifestFetch, TransferStats) {
        if let problem = Self.localFileProblem(url, what: "manifest") { throw problem }
        let context = TransferContext(limit: Int64(limits.maxManifestBytes), held: 0, rangeStart: 0)
        let headers = try access.headers() + (etag.map { ["If-None-Match: \($0)"] } ?? []) + (revalidate ? Self.revalidation : [])
        let started = ContinuousClock.now
        let outcome = await CurlTransfer.run(url: url, limits: smallFileLimits, context: context, handles: handles, access: access,
                                             headers: headers, proxyLogin: try access.proxyLoginForTransfer())
        try checkSmallFileTime(outcome, started: started, what: "manifest")
        // A 304 means "the ETag sent still holds": to a request that sent none it says nothing,
        // and taking it for "up to date" would keep a device without a version from installing.
        if outcome.status == 304 {
            guard etag != nil else { throw SyncError(.httpStatus, "the source answered HTTP 304 (not modified) for the manifest to a request that sent no ETag") }
            return (.notModified, outcome.stats)
        }
        try check(outcome, context, what: "manifest", url: url, access: access)
        return (.fetched(bytes: context.body, etag: context.etag), outcome.stats)
    }

    /// GETs a small file that may be absent (a root, protocol/root.md): nil for HTTP 404, 403 or
    /// 410 and for a missing file under `file://`; at most `maxManifestBytes`.
    public func fetchOptional(url: String, access: SourceAccess = .none) async throws(SyncError) -> ([UInt8]?, TransferStats) {
        if let problem = Self.localFileProblem(url, what: "root") { throw problem }
        let context = TransferContext(limit: Int64(limits.maxManifestBytes), held: 0, rangeStart: 0)
        let started = ContinuousClock.now
        let outcome = await CurlTransfer.run(url: url, limits: smallFileLimits, context: context, handles: handles, access: access,
                                             headers: try access.headers(), proxyLogin: try access.proxyLoginForTransfer())
        try checkSmallFileTime(outcome, started: started, what: "root")
        if [403, 404, 410].contains(outcome.status) || outcome.code == CURLE_FILE_COULDNT_READ_FILE { return (nil, outcome.stats) }
        try check(outcome, context, what: "root", url: url, access: access)
        return (context.body, outcome.stats)
    }

    /// Downloads the blob at `url` into `path` until it holds exactly `size` bytes, resuming a
    /// partial file with `Range: bytes=<held>-` and restarting it when the server ignores the
    /// range (200) or cannot satisfy it (416). Never writes more than `size` bytes.
    /// A cut or stalled transfer leaves the partial file for the next attempt.
    public func download(url: String, to path: String, size: Int64, access: SourceAccess = .none) async throws(SyncError) -> TransferStats {
        try await download(url: url, to: path, size: size, access: access, tap: nil, progress: nil)
    }

    /// `download(url:to:size:)`, where `tap` sees the body bytes as they are written when the
    /// file starts empty (never after a resume: the caller compares what it saw with `size`); the
    /// transfer then runs on an install thread (`BackgroundWork`), as the tap's work is an install's.
    /// `progress` counts the bytes written (and, when a restart from zero discards bytes already
    /// held, expects them again). `handingOver`: a later source can take the blob over, so a
    /// transfer slower than `TransferLimits.effectiveSlowSourceRate` is cut (`SlowSource`), its
    /// bytes kept for that source to resume. `revalidate`: the request asks every cache on the way
    /// to check its copy with the origin (`Cache-Control: no-cache`, and HTTP/1.0's `Pragma`).
    func download(url: String, to path: String, size: Int64, access: SourceAccess = .none,
                  tap: (any DownloadTap)?, progress: SyncProgress?, handingOver: Bool = false,
                  revalidate: Bool = false) async throws(SyncError) -> TransferStats {
        if let problem = Self.localFileProblem(url, what: "blob", size: size) { throw problem }
        let headers = try access.headers() + (revalidate ? Self.revalidation : [])
        let proxyLogin = try access.proxyLoginForTransfer()
        var stats = TransferStats()
        for _ in 0..<2 {
            var held = Self.fileSize(path)
            if held > size {
                truncate(path, 0)
                progress?.expect(size)
                held = 0
            }
            if held == size { return stats }
            let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw SyncError(.io, "cannot open staging file \(path): \(String(cString: strerror(errno)))") }
            lseek(fd, off_t(held), SEEK_SET)
            let context = TransferContext(limit: size, held: held, rangeStart: held)
            context.fd = fd
            context.tap = held == 0 ? tap : nil
            // The tap consumes a streamed blob as it arrives and the file is kept for export: its
            // pages need not stay in the page cache (a later attempt that resumes a cut download
            // reads the whole file again, from disk then).
            context.behind = context.tap == nil ? nil : FileSystem.WriteBehind()
            context.progress = progress
            if handingOver, let rate = limits.effectiveSlowSourceRate { context.pace = (rate, max(1, limits.slowSourceSeconds)) }
            let outcome = await CurlTransfer.run(url: url, limits: limits, context: context, handles: handles, access: access,
                                                 headers: headers, proxyLogin: proxyLogin, range: held,
                                                 onInstallThread: context.tap != nil)
            close(fd)
            stats.add(outcome.stats)
            if outcome.status == 416 {
                // A range from inside the signed size refused as past the end: the source's copy
                // is shorter than signed. What is held (from another source, perhaps) stays.
                if let total = context.contentRangeTotal, total != size { throw Self.wrongSize(total, size, what: "blob") }
                logger.info("range not satisfiable; restarting the download", metadata: ["cairn.sync.url": "\(url)"])
                progress?.expect(Self.fileSize(path))
                truncate(path, 0)
                continue
            }
            if context.exceeded { unlink(path) }
            try check(outcome, context, what: "blob", url: url, access: access)
            guard context.held == size else {
                throw SyncError(.network, "the blob transfer ended after \(context.held) of \(size) bytes; it resumes on the next try")
            }
            return stats
        }
        throw SyncError(.httpStatus, "the source cannot serve the blob's byte range (416)")
    }

    /// libcurl's TLS failures (handshake, peer verification, CA file, client certificate).
    static let tlsCodes: Set<UInt32> = [CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
                                        CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR,
                                        CURLE_SSL_CRL_BADFILE, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS,
                                        CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED,
                                        CURLE_SSL_CLIENTCERT].reduce(into: []) { $0.insert($1.rawValue) }

    /// A 401 is always `unauthorized`; a 403 only when the source has credentials configured (a
    /// public bucket answers 403 for what it does not have).
    private func check(_ outcome: CurlOutcome, _ context: TransferContext, what: String, url: String,
                       access: SourceAccess) throws(SyncError) {
        let hasCredentials = access.netrcFile != nil || access.tokenFile != nil || access.clientCertificate != nil
        if context.exceeded {
            throw SyncError(.sizeExceeded, "the \(what) is larger than the \(context.limit) bytes allowed; transfer aborted")
        }
        if context.writeFailed {
            let reason = String(cString: strerror(context.writeErrno))
            if [ENOSPC, EFBIG, EDQUOT].contains(context.writeErrno) {
                throw SyncError(.diskFull, "the disk filled while downloading the \(what) (\(reason)); it resumes when space returns")
            }
            throw SyncError(.io, "cannot write the \(what) to the staging folder: \(reason)")
        }
        if let received = context.tooSlow, let pace = context.pace {
            throw SyncError(.network, "the source sent \(received) bytes of the \(what) in \(pace.seconds) s, under slow_source_rate (\(pace.bytesPerSecond) bytes a second); the next source resumes its \(context.held) bytes",
                            cause: SlowSource())
        }
        if outcome.code == CURLE_ABORTED_BY_CALLBACK { throw SyncError(.cancelled, "the \(what) transfer was cancelled") }
        // A proxy's own refusals: its 407 to a plain-HTTP request, or its answer to the CONNECT
        // that tunnels to an https source.
        let proxy = access.proxyNamed.map { "the proxy \($0)" } ?? "the proxy"
        if outcome.status == 407 || outcome.proxyStatus == 407 {
            var login = access.proxyAuthFile.map { "refused the login in proxy_auth_file \($0)" } ?? "asks for a login; set proxy_auth_file"
            do { _ = try access.proxyCredentials() } catch { login = "asks for a login, and \(error.message)" }
            throw SyncError(.unauthorized, "\(proxy) \(login) (HTTP 407 for the \(what))")
        }
        // Through an https:// proxy, a TLS failure before the proxy answered a CONNECT is the
        // proxy's own.
        let beforeTheTunnel = access.proxyNamed.map(SourceURL.isHTTPS) == true && outcome.proxyStatus == 0
        // (libcurl marks the proxy's certificate unverified as a handshake begins: a handshake
        // cut by a timeout or a reset is a network failure, not the certificate's.)
        if (outcome.proxyTLSFailed || beforeTheTunnel) && Self.tlsCodes.contains(outcome.code.rawValue) {
            throw SyncError(.tls, "TLS with \(proxy) failed for the \(what): \(outcome.message) (curl \(outcome.code.rawValue)); check proxy_ca_bundle")
        }
        if outcome.proxyStatus >= 300 {
            throw SyncError(.httpStatus, "\(proxy) refused to tunnel to the source for the \(what) (HTTP \(outcome.proxyStatus) to CONNECT)")
        }
        // A bucket answers 403, not 404, for a key it does not hold unless the credentials may
        // list it: for a blob, whose manifest the same credentials read, that is as likely as a
        // refusal, and a blob not there yet is one to ask another source for.
        if outcome.status == 403 && (access.netrcFile != nil || access.tokenFile != nil) && what == "blob" {
            throw SyncError(.httpStatus, "the source answered HTTP 403 for the blob with this device's credentials: a bucket answers so for a key it does not hold (not yet copied there) unless they may list it (s3:ListBucket); else they do not reach blobs/ (netrc_file, token_file)",
                            cause: NotHeld(forbidden: true))
        }
        if outcome.status == 401 || (outcome.status == 403 && hasCredentials) {
            throw SyncError(.unauthorized, "the source refused access to the \(what) (HTTP \(outcome.status)); check its netrc_file or token_file")
        }
        // nginx answers 400 when a client certificate it requires is missing or refused, and says
        // so in its page; any other 400 (an S3 InvalidArgument) is the status it is.
        if outcome.status == 400 && SourceURL.isHTTPS(url)
            && String(decoding: context.refusedBody, as: UTF8.self).localizedCaseInsensitiveContains("SSL certificate") {
            throw SyncError(.tls, "the source answered HTTP 400 over TLS for the \(what): it requires a client certificate it did not get or accept (client_cert, client_key)")
        }
        if Self.tlsCodes.contains(outcome.code.rawValue) {
            throw SyncError(.tls, "TLS with the source failed for the \(what): \(outcome.message) (curl \(outcome.code.rawValue)); check ca_bundle, client_cert and client_key")
        }
        if let encoding = context.encoding, (200..<300).contains(outcome.status) {
            throw SyncError(.httpStatus, "the source (or a proxy on the way) sent the \(what) compressed (Content-Encoding: \(encoding)) although cairnd asked for it as published; nothing of it was kept: check the proxy, or use https so that none can change it")
        }
        if context.wrongTotal, let total = context.contentRangeTotal { throw Self.wrongSize(total, context.limit, what: what) }
        if context.wrongLength {
            throw SyncError(.httpStatus, "the source answered HTTP \(outcome.status) with \(context.contentLength ?? 0) bytes for the \(what), not the \(context.limit - (outcome.status == 206 ? context.rangeStart : 0)) asked for: not the \(what) (an error or captive-portal page?); nothing of it was kept",
                            cause: WrongSize())
        }
        if context.misplacedRange {
            throw SyncError(.httpStatus, "the source answered HTTP 206 with \(context.contentRangeStart.map { "bytes from \($0)" } ?? "no byte range") for the \(what), not the bytes from \(context.rangeStart) asked for")
        }
        if outcome.code == CURLE_UNSUPPORTED_PROTOCOL, (300..<400).contains(outcome.status) {
            throw SyncError(.httpStatus, "the source redirected the \(what) (HTTP \(outcome.status)) to a scheme not allowed: a server only to http or https, an https source only to https")
        }
        // Only 200 (the whole file) and 206 (the range asked for) carry the bytes asked for;
        // file:// has no status.
        if outcome.status != 0, outcome.status != 200, outcome.status != 206 {
            // 404 and 410 say the source does not hold the file, as a public bucket's 403 does.
            let notHeld = [404, 410].contains(outcome.status) || (outcome.status == 403 && !hasCredentials)
            // A plain-HTTP request through an HTTP proxy gets the proxy's own answer when it
            // cannot reach the source (through a CONNECT tunnel the source answers itself).
            let proxied = access.proxyNamed.map(SourceURL.isHTTP) == true && !SourceURL.isHTTPS(url)
                && [502, 503, 504].contains(outcome.status)
            let whose = proxied ? " (through \(proxy): a 502, 503 or 504 may be the proxy's own, unable to reach the source)" : ""
            throw SyncError(.httpStatus, "the source answered HTTP \(outcome.status) for the \(what)\(whose)", cause: notHeld ? NotHeld() : nil)
        }
        guard outcome.code == CURLE_OK else {
            // A file:// source without the file does not hold it, as a 404 says of a server.
            let through = access.proxyNamed.map { " through the proxy \($0)" } ?? ""
            throw SyncError(.network, "the \(what) transfer failed\(through): \(outcome.message) (curl \(outcome.code.rawValue))",
                            cause: outcome.code == CURLE_FILE_COULDNT_READ_FILE ? NotHeld() : nil)
        }
    }

    /// The cause of an error for a file the source does not hold (a `file://` folder without it).
    /// `forbidden`: a 403 to the device's credentials, which may be a refusal too (credentials
    /// that do not reach `blobs/`): not a transport failure (`SyncError.isTransport`), so the
    /// attempt's news even where another source answers.
    public struct NotHeld: Error, Sendable {
        public var forbidden = false
    }

    /// The cause of an error for a blob download cut for its pace while a later source could
    /// take it over (`download(…handingOver:)`).
    public struct SlowSource: Error, Sendable {}

    /// The cause of an error for a file whose copy at the source is not its signed size (a
    /// copy cut short, or an error page in its place): the next request for it asks caches to
    /// revalidate, as after a hash mismatch.
    public struct WrongSize: Error, Sendable {}

    /// The source's copy of a file is `total` bytes where `size` are signed; what is held stays.
    static func wrongSize(_ total: Int64, _ size: Int64, what: String) -> SyncError {
        SyncError(.httpStatus, "the source's copy of the \(what) is \(total) bytes, not the \(size) signed (cut short on its way in, or damaged); nothing of it was kept, and the bytes already held stay for the next source",
                  cause: WrongSize())
    }

    /// The cause of an error for a delta a server or mirror does not hold while a later source
    /// might (`Syncer.buildIndex`): asked there before this one's snapshot, tens of times larger.
    public struct DeltaElsewhere: Error, Sendable {}

    static func fileSize(_ path: String) -> Int64 {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : 0
    }
}
