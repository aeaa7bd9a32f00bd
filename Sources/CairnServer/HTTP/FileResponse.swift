import CairnSearch
import Foundation
import Hummingbird

/// Builds the response for a repository file: caching headers, conditional requests, byte
/// ranges and HEAD. Small documents come from memory; blobs stream from disk in chunks.
struct FileResponse {
    var file: RepositoryFile
    var resolved: RepositoryRoot.Resolved
    var documents: DocumentCache
    var fileIO: FileIO

    func response(to request: Request, context: some RequestContext) async throws -> Response {
        var document: DocumentCache.Document?
        let etag: String
        let size: Int
        if let name = file.immutableName {
            // A blob is opened only once its status and headers are sent: one this server may
            // not read answered 200, then the connection was cut, and every device retried.
            if let failure = unreadable(context) { return failure }
            // Its name and its time: a blob repaired on the disk (a publish that found it damaged
            // writes it again) is another ETag, so a cache that kept the damaged copy and
            // revalidates (a device's no-cache retry) gets the new bytes, not a 304 for a year.
            // Seconds, which a copy with `rsync -a` keeps: mirrors of one repository agree.
            etag = "\"\(name)-\(String(resolved.modified, radix: 16))\""
            size = resolved.size
        } else {
            guard let loaded = documents.document(resolved) else { return unreadable(context) ?? Responses.error(.notFound) }
            document = loaded
            etag = "\"\(loaded.sha256)\""
            size = loaded.bytes.readableBytes
        }
        var headers: HTTPFields = [
            .eTag: etag,
            .lastModified: HTTPDate.format(resolved.modified),
            .cacheControl: file.cacheControl,
            .acceptRanges: "bytes",
        ]
        // A date says nothing certain of a file replaced in place (two writes in one second, a
        // clock set back): for a manifest or a key, only its ETag (the SHA-256 of its bytes) counts.
        let dated = document == nil ? resolved.modified : nil
        if Conditional.notModified(request.headers, etag: etag, lastModified: dated) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = file.contentType
        var range = ByteRange.full
        if request.method == .get, Conditional.rangeApplies(request.headers, etag: etag, lastModified: dated) {
            range = ByteRange(header: request.headers[.range], size: size)
        }
        let status: HTTPResponse.Status
        let bytes: ClosedRange<Int>?
        switch range {
        case .unsatisfiable:
            headers[.contentRange] = "bytes */\(size)"
            headers[.contentLength] = "0"
            // Not the file's caching: a cache that kept this answer for a year would answer
            // every resume with it.
            headers[.cacheControl] = "no-store"
            return Response(status: .rangeNotSatisfiable, headers: headers)
        case .full:
            status = .ok
            bytes = size > 0 ? 0...(size - 1) : nil
        case .partial(let part):
            status = .partialContent
            bytes = part
            headers[.contentRange] = "bytes \(part.lowerBound)-\(part.upperBound)/\(size)"
        }
        let length = bytes?.count ?? 0
        headers[.contentLength] = String(length)
        guard request.method == .get, let bytes else { return Response(status: status, headers: headers) }
        if let document {
            let slice = document.bytes.getSlice(at: bytes.lowerBound, length: length) ?? ByteBuffer()
            return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: slice))
        }
        let body = try await fileIO.loadFile(path: resolved.path, range: bytes, context: context)
        return Response(status: status, headers: headers, body: body)
    }

    /// A 500 when the file is there but cannot be opened (permissions: a publish under umask
    /// 077 writes files only their owner reads; no descriptor left; a disk error), said in the
    /// log with the remedy; nil when it opens (or has gone: the caller answers 404).
    private func unreadable(_ context: some RequestContext) -> Response? {
        let fd = open(resolved.path, O_RDONLY | O_CLOEXEC)
        guard fd < 0 else {
            close(fd)
            return nil
        }
        let code = errno
        guard code != ENOENT else { return nil }
        return Self.unreadableAnswer("a repository file cannot be read", path: file.relativePath, errno: code, context: context)
    }

    /// The 500 for a repository file or folder this server cannot read, logged in one line
    /// with what to do about the cause.
    static func unreadableAnswer(_ what: String, path: String, errno code: Int32, context: some RequestContext) -> Response {
        let hint = [EMFILE, ENFILE].contains(code)
            ? "too many open files: raise the server's limit (LimitNOFILE= under systemd, ulimit -n)"
            : "the server's user must read every file and folder of the repository (chmod -R a+rX it)"
        context.logger.error("\(what); answered 500", metadata: [
            "cairn.http.path": "\(path)", "cairn.error": "\(String(cString: strerror(code)))", "cairn.hint": "\(hint)",
        ])
        return Responses.error(.internalServerError)
    }
}

/// Short fixed responses.
enum Responses {
    static func error(_ status: HTTPResponse.Status) -> Response {
        let code = String(status.reasonPhrase.lowercased().map { $0 == " " ? "_" : $0 })
        return json(status, "{\"error\":\"\(code)\"}\n")
    }

    static func json(_ status: HTTPResponse.Status, _ text: String) -> Response {
        Response(status: status, headers: [.contentType: "application/json", .cacheControl: "no-store"],
                 body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    /// An online search answer or error (the daemon's JSON).
    static func json(_ status: HTTPResponse.Status, bytes: [UInt8]) -> Response {
        Response(status: status, headers: [.contentType: APIJSON.contentType, .cacheControl: "no-store"],
                 body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
