import CCurl
import CairnCore
import CairnThreads
import Dispatch
import Foundation
import Synchronization

/// Bytes and requests one operation put on the wire (what a metered link pays for).
public struct TransferStats: Sendable, Equatable {
    public var requests = 0
    /// Body bytes received (`CURLINFO_SIZE_DOWNLOAD_T`).
    public var bodyBytes: Int64 = 0
    /// Header bytes received (`CURLINFO_HEADER_SIZE`).
    public var headerBytes: Int64 = 0
    /// Connections opened (`CURLINFO_NUM_CONNECTS`): a request on a kept-alive one opens none.
    public var connections = 0
    public var totalBytes: Int64 { bodyBytes + headerBytes }

    public init() {}

    mutating func add(_ other: TransferStats) {
        requests += other.requests
        bodyBytes += other.bodyBytes
        headerBytes += other.headerBytes
        connections += other.connections
    }
}

/// The outcome of one `curl_easy_perform`.
struct CurlOutcome: Sendable {
    var code: CURLcode
    var message: String
    var status: Int
    var stats: TransferStats
    /// The proxy's answer to a CONNECT for an https source (`CURLINFO_HTTP_CONNECTCODE`); 0 without one.
    var proxyStatus = 0
    /// Whether the certificate of an `https://` proxy did not verify (`CURLINFO_PROXY_SSL_VERIFYRESULT`).
    var proxyTLSFailed = false
}

/// One libcurl easy transfer, run on a Dispatch queue (never on the cooperative pool, because
/// `curl_easy_perform` blocks) or on an install thread, and cancelled through the progress callback.
enum CurlTransfer {
    /// `curl_global_init`, once per process, before any handle exists.
    private static let globalInit: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
    private static let queue = DispatchQueue(label: "cairn.sync.curl", qos: .utility, attributes: .concurrent)

    /// - Parameters:
    ///   - proxyLogin: `user:password` for the proxy (`SourceAccess.proxyCredentials`).
    ///   - onInstallThread: run on a `BackgroundWork` thread (below the queries' priority),
    ///     for a transfer whose callbacks do an install's work.
    static func run(url: String, limits: TransferLimits, context: TransferContext, handles: CurlHandles,
                    access: SourceAccess = .none, headers: [String] = [], proxyLogin: String? = nil, range: Int64 = 0,
                    onInstallThread: Bool = false) async -> CurlOutcome {
        await withTaskCancellationHandler {
            if onInstallThread {
                return await BackgroundWork.run {
                    perform(url: url, limits: limits, context: context, handles: handles, access: access, headers: headers,
                            proxyLogin: proxyLogin, range: range)
                }
            }
            return await withCheckedContinuation { (continuation: CheckedContinuation<CurlOutcome, Never>) in
                queue.async {
                    continuation.resume(returning: perform(url: url, limits: limits, context: context, handles: handles,
                                                           access: access, headers: headers, proxyLogin: proxyLogin, range: range))
                }
            }
        } onCancel: {
            context.cancelled.store(true, ordering: .relaxed)
        }
    }

    private static func perform(url: String, limits: TransferLimits, context: TransferContext, handles: CurlHandles,
                                access: SourceAccess, headers: [String], proxyLogin: String?, range: Int64) -> CurlOutcome {
        // A kept handle carries its TLS and credential options: one per origin and access.
        let origin = Substring(CurlHandles.origin(of: url) + "\u{0}" + access.handleKey)
        guard globalInit, let handle = handles.take(for: origin) else {
            return CurlOutcome(code: CURLE_FAILED_INIT, message: "libcurl cannot be initialised", status: 0, stats: TransferStats())
        }
        defer { handles.giveBack(handle, origin: origin) }
        context.handle = handle
        var list: UnsafeMutablePointer<curl_slist>?
        // Every byte is checked against a SHA-256 of the bytes as published: a proxy must not
        // compress them on the way (one that does anyway is refused, `TransferContext.encoding`).
        for header in headers + ["Accept-Encoding: identity"] { list = curl_slist_append(list, header) }
        defer { curl_slist_free_all(list) }
        let pointer = Unmanaged.passUnretained(context).toOpaque()
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)

        let code: CURLcode = errorBuffer.withUnsafeMutableBufferPointer { buffer in
            _ = cairn_curl_setopt_string(handle, CURLOPT_URL, url)
            _ = cairn_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
            _ = cairn_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https,file")
            // A redirect may not lead from a server to a local file, nor from HTTPS to plain HTTP.
            _ = cairn_curl_setopt_string(handle, CURLOPT_REDIR_PROTOCOLS_STR, SourceURL.isHTTPS(url) ? "https" : "http,https")
            _ = cairn_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 1)
            _ = cairn_curl_setopt_long(handle, CURLOPT_MAXREDIRS, limits.maxRedirects)
            _ = cairn_curl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1)
            _ = cairn_curl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2)
            _ = cairn_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT, limits.connectTimeout)
            _ = cairn_curl_setopt_long(handle, CURLOPT_TIMEOUT, limits.overallTimeout)
            _ = cairn_curl_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, limits.effectiveLowSpeed)
            _ = cairn_curl_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, limits.lowSpeedSeconds)
            if let cap = limits.bandwidthCap {
                _ = cairn_curl_setopt_offset(handle, CURLOPT_MAX_RECV_SPEED_LARGE, curl_off_t(cap))
            }
            _ = cairn_curl_setopt_string(handle, CURLOPT_USERAGENT, "cairnd/" + CairnVersion.date)
            if let netrc = access.netrcFile {
                _ = cairn_curl_setopt_long(handle, CURLOPT_NETRC, Int(CURL_NETRC_OPTIONAL.rawValue))
                _ = cairn_curl_setopt_string(handle, CURLOPT_NETRC_FILE, netrc)
            }
            if let ca = access.caBundle { _ = cairn_curl_setopt_string(handle, CURLOPT_CAINFO, ca) }
            if let certificate = access.clientCertificate { _ = cairn_curl_setopt_string(handle, CURLOPT_SSLCERT, certificate) }
            if let key = access.clientKey { _ = cairn_curl_setopt_string(handle, CURLOPT_SSLKEY, key) }
            // Unset, libcurl takes the proxy from the environment (https_proxy, no_proxy, …);
            // "" (proxy = none) goes direct whatever the environment says, and a proxy set in
            // cairnd.conf is not undone by an environment's no_proxy (a source to go direct
            // says so in its own section).
            if let proxy = access.proxy {
                _ = cairn_curl_setopt_string(handle, CURLOPT_PROXY, proxy)
                if !proxy.isEmpty { _ = cairn_curl_setopt_string(handle, CURLOPT_NOPROXY, "") }
            }
            if let ca = access.proxyCABundle { _ = cairn_curl_setopt_string(handle, CURLOPT_PROXY_CAINFO, ca) }
            if let proxyLogin {
                // Basic, sent with the first request: asking the proxy which scheme it takes
                // would cost a round trip per request (a handle forgets it between transfers),
                // over a link where one may take a second.
                _ = cairn_curl_setopt_string(handle, CURLOPT_PROXYUSERPWD, proxyLogin)
                _ = cairn_curl_setopt_long(handle, CURLOPT_PROXYAUTH, cairn_curl_auth_basic())
            }
            _ = cairn_curl_setopt_slist(handle, CURLOPT_HTTPHEADER, list)
            if range > 0 {
                // CURLOPT_RANGE rather than RESUME_FROM: on a 200 (range ignored) libcurl
                // delivers the whole body, which restarts the file in the same request.
                _ = cairn_curl_setopt_string(handle, CURLOPT_RANGE, "\(range)-")
            }
            _ = cairn_curl_setopt_data_callback(handle, CURLOPT_WRITEFUNCTION, CurlCallbacks.write)
            _ = cairn_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, pointer)
            _ = cairn_curl_setopt_data_callback(handle, CURLOPT_HEADERFUNCTION, CurlCallbacks.header)
            _ = cairn_curl_setopt_pointer(handle, CURLOPT_HEADERDATA, pointer)
            _ = cairn_curl_setopt_progress_callback(handle, CurlCallbacks.progress)
            _ = cairn_curl_setopt_pointer(handle, CURLOPT_XFERINFODATA, pointer)
            _ = cairn_curl_setopt_long(handle, CURLOPT_NOPROGRESS, 0)
            _ = cairn_curl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, buffer.baseAddress)
            let code = curl_easy_perform(handle)
            // The buffer does not outlive this closure; the handle does.
            _ = cairn_curl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, nil)
            return code
        }
        var status = 0
        _ = cairn_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        var body: curl_off_t = 0
        _ = cairn_curl_getinfo_offset(handle, CURLINFO_SIZE_DOWNLOAD_T, &body)
        var header = 0
        _ = cairn_curl_getinfo_long(handle, CURLINFO_HEADER_SIZE, &header)
        var connections = 0
        _ = cairn_curl_getinfo_long(handle, CURLINFO_NUM_CONNECTS, &connections)
        var proxyStatus = 0
        _ = cairn_curl_getinfo_long(handle, CURLINFO_HTTP_CONNECTCODE, &proxyStatus)
        var proxyVerify = 0
        _ = cairn_curl_getinfo_long(handle, CURLINFO_PROXY_SSL_VERIFYRESULT, &proxyVerify)
        var stats = TransferStats()
        stats.requests = 1
        stats.bodyBytes = Int64(body)
        stats.headerBytes = Int64(header)
        stats.connections = connections
        let detail = String(decoding: errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let message = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        context.handle = nil
        return CurlOutcome(code: code, message: message, status: status, stats: stats, proxyStatus: proxyStatus,
                           proxyTLSFailed: proxyVerify != 0)
    }
}

/// A downloader's easy handles between transfers, each with the connections libcurl keeps open
/// in it: the next transfer to the same origin (a sync's blob after its manifest, the next poll)
/// takes the handle that last talked to that origin and reuses its connection instead of
/// connecting — and over HTTPS handshaking — again. libcurl checks that a kept connection is
/// still alive before it reuses it, and reuses none idle for over 118 s (`CURLOPT_MAXAGE_CONN`).
/// A handle serves one transfer at a time (taken out of the list); a transfer to an origin no
/// idle handle knows gets a new handle, so it never takes another origin's connection away;
/// beyond `maximumIdle` the least recently used is closed. Each `Downloader` (one per syncer)
/// has its own, so several syncers in one process never take each other's connections.
final class CurlHandles: Sendable {
    private let idle = Mutex<[EasyHandle]>([])
    private let maximumIdle = 4

    private struct EasyHandle: @unchecked Sendable {
        let pointer: UnsafeMutableRawPointer
        /// Scheme, host and port of the handle's last transfer.
        let origin: Substring
    }

    deinit {
        for handle in idle.withLock({ $0 }) { curl_easy_cleanup(handle.pointer) }
    }

    /// `scheme://host:port` of `url` (everything before the path).
    static func origin(of url: String) -> Substring {
        guard let scheme = url.range(of: "://") else { return url[...] }
        let rest = url[scheme.upperBound...]
        return url[..<(rest.firstIndex(of: "/") ?? url.endIndex)]
    }

    /// The idle handle that last talked to `origin`, else a new one (nil if libcurl cannot make one).
    func take(for origin: Substring) -> UnsafeMutableRawPointer? {
        let kept = idle.withLock { handles -> EasyHandle? in
            guard let index = handles.lastIndex(where: { $0.origin == origin }) else { return nil }
            return handles.remove(at: index)
        }
        return kept?.pointer ?? curl_easy_init()
    }

    /// Clears the transfer's options (callbacks, buffers, headers), keeping its connections.
    func giveBack(_ handle: UnsafeMutableRawPointer, origin: Substring) {
        curl_easy_reset(handle)
        let evicted = idle.withLock { handles -> EasyHandle? in
            handles.append(EasyHandle(pointer: handle, origin: origin))
            return handles.count > maximumIdle ? handles.removeFirst() : nil
        }
        if let evicted { curl_easy_cleanup(evicted.pointer) }
    }
}
