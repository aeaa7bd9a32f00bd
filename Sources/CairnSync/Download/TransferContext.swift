import CairnStore
import CCurl
import Foundation
import Synchronization

/// Sees a blob's bytes as a download writes them, on the transfer's thread (to hash and inflate
/// them while they arrive).
protocol DownloadTap: AnyObject, Sendable {
    func receive(_ bytes: UnsafeRawBufferPointer)
}

/// The state one libcurl transfer's C callbacks reach through their context pointer: where the
/// body goes (a file descriptor or memory), the byte cap, the response status, the ETag.
///
/// `@unchecked Sendable`: every field but `cancelled` is touched only by the thread running
/// `curl_easy_perform` (the callbacks run on it, synchronously); `cancelled` is an `Atomic`,
/// set from the cancelling task.
final class TransferContext: @unchecked Sendable {
    let cancelled = Atomic<Bool>(false)
    var handle: UnsafeMutableRawPointer?
    /// File sink; -1 for memory.
    var fd: Int32 = -1
    var body: [UInt8] = []
    /// The most bytes the destination may hold (resume offset included).
    let limit: Int64
    /// Bytes the destination holds now.
    var held: Int64
    /// The range start requested (0: none).
    let rangeStart: Int64
    var status = 0
    private var statusChecked = false
    private var discarding = false
    /// Body bytes of a refused answer (an error page) read so far.
    private var discarded = 0
    /// The start of a refused answer's body (at most `refusedBodyKept` bytes): what the error
    /// page says, e.g. nginx's "No required SSL certificate was sent".
    private(set) var refusedBody: [UInt8] = []
    static let refusedBodyKept = 1024
    /// The most of a refused answer's body read before the transfer is cut: the status says
    /// what went wrong, and an endless error page must not eat a metered link.
    static let discardLimit = 64 << 10
    /// The first byte of the `Content-Range` of the current response (nil: none).
    var contentRangeStart: Int64?
    /// Its last byte (nil: none, or not a `first-last` range).
    var contentRangeEnd: Int64?
    /// The file's whole length it names (`…/<length>`, also a 416's `*/<length>`; nil: none, or `*`).
    var contentRangeTotal: Int64?
    /// A file's 206 naming a whole length that is not its signed size: the source's copy is
    /// another file (cut short on its way in, or damaged). Cut before a byte is written.
    var wrongTotal = false
    /// A 206 whose range does not start where the request asked: its bytes would land at the
    /// wrong offset, so the transfer is cut.
    var misplacedRange = false
    /// The `Content-Length` of the current response (nil: none, or chunked).
    var contentLength: Int64?
    /// A file's download (a blob, a model file: its size is signed) answered with a length that
    /// is not what the request asked for: an error or captive-portal page sent as 200, or a
    /// broken proxy. Cut before a byte is written, so that no source resumes it as the blob.
    var wrongLength = false
    var exceeded = false
    var writeFailed = false
    /// The errno of the failed write (ENOSPC, EFBIG, EROFS…).
    var writeErrno: Int32 = 0
    var restartedFromZero = false
    var etag: String?
    /// The response's `Content-Encoding` when it is not `identity`: the body is not the bytes
    /// published (a proxy compressed them although cairnd asked for identity), so it is refused.
    var encoding: String?
    /// Sees every body byte written to `fd`, in order, after it is written.
    var tap: (any DownloadTap)?
    /// Counts the body bytes written to `fd` (status's sync progress).
    var progress: SyncProgress?
    /// Drops the file's pages from the page cache behind the writes (`FileSystem.WriteBehind`;
    /// set for a file written from its first byte whose bytes the tap consumes as they arrive).
    var behind: FileSystem.WriteBehind?
    /// The least a blob download must receive per window before a later source takes it over
    /// (`keepsPace`); nil: no floor but libcurl's low-speed limit.
    var pace: (bytesPerSecond: Int64, seconds: Int)?
    private var windowStart = ContinuousClock.now
    private var heldAtWindowStart: Int64
    /// Set when `keepsPace` cut the transfer: what its last window received.
    private(set) var tooSlow: Int64?

    init(limit: Int64, held: Int64, rangeStart: Int64) {
        self.limit = limit
        self.held = held
        self.rangeStart = rangeStart
        heldAtWindowStart = held
    }

    /// From libcurl's progress callback (at least once a second): false, which cuts the transfer,
    /// when a whole window of `pace` ends with fewer bytes received than the pace asks.
    func keepsPace() -> Bool {
        // An error page is read (64 KiB at most) to be refused for its status, not taken over.
        guard let pace, !discarding else { return true }
        let now = ContinuousClock.now
        guard now - windowStart >= .seconds(pace.seconds) else { return true }
        let received = held - heldAtWindowStart
        guard received >= pace.bytesPerSecond * Int64(pace.seconds) else {
            tooSlow = received
            return false
        }
        (windowStart, heldAtWindowStart) = (now, held)
        return true
    }

    /// Body bytes from libcurl. Returning fewer than `count` aborts the transfer.
    func receive(_ data: UnsafeRawPointer, _ count: Int) -> Int {
        if !statusChecked { checkStatus() }
        if misplacedRange || wrongLength || wrongTotal { return 0 }
        // Only a success's body is the file: an error page may come compressed.
        if encoding != nil, !discarding { return 0 }
        if discarding {
            if refusedBody.count < Self.refusedBodyKept {
                refusedBody += UnsafeRawBufferPointer(start: data, count: min(count, Self.refusedBodyKept - refusedBody.count))
            }
            discarded += count
            return discarded <= Self.discardLimit ? count : 0
        }
        guard held + Int64(count) <= limit else {
            exceeded = true
            return 0
        }
        if fd >= 0 {
            var done = 0
            while done < count {
                let result = write(fd, data + done, count - done)
                if result < 0 {
                    if errno == EINTR { continue }
                    writeFailed = true
                    writeErrno = errno
                    return 0
                }
                done += result
            }
            tap?.receive(UnsafeRawBufferPointer(start: data, count: count))
            progress?.received(Int64(count))
            if let failure = behind?.wrote(upTo: held + Int64(count), fd: fd), failure != 0 {
                writeFailed = true
                writeErrno = failure
                return 0
            }
        } else {
            body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: count))
        }
        held += Int64(count)
        return count
    }

    /// On the first body bytes: a 200 to a range request means the server ignored the range,
    /// so the file restarts from zero; a 206 must start where the range asked; any other
    /// status's body is discarded (up to `discardLimit`) and the status refused.
    private func checkStatus() {
        statusChecked = true
        var code = 0
        _ = cairn_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &code)
        status = code
        switch code {
        case 0:
            break // file:// (no status) honours ranges
        case 206:
            misplacedRange = contentRangeStart != rangeStart
            if fd >= 0, let contentRangeTotal, contentRangeTotal != limit {
                wrongTotal = true
                return
            }
            // A server may cap what one range answer carries: the length must match the range
            // it names, which need not run to the blob's end (the rest comes at the next try).
            let named = contentRangeEnd.map { $0 - rangeStart + 1 } ?? (limit - rangeStart)
            if !misplacedRange, fd >= 0, let contentLength, contentLength != named { wrongLength = true }
        case 200:
            if fd >= 0, let contentLength, contentLength != limit {
                wrongLength = true
                return
            }
            if rangeStart > 0, fd >= 0 {
                _ = ftruncate(fd, 0)
                _ = lseek(fd, 0, SEEK_SET)
                progress?.expect(held)
                held = 0
                heldAtWindowStart = 0
                restartedFromZero = true
            }
        default:
            discarding = true
        }
    }

    /// One header line; a status line starts a new response (a redirect), which forgets the ETag.
    func header(_ data: UnsafeRawPointer, _ count: Int) -> Int {
        let line = String(decoding: UnsafeRawBufferPointer(start: data, count: count), as: UTF8.self)
        let lowered = line.lowercased()
        if line.hasPrefix("HTTP/") {
            (etag, contentRangeStart, contentRangeEnd, contentRangeTotal, contentLength, encoding) = (nil, nil, nil, nil, nil, nil)
        } else if lowered.hasPrefix("content-encoding:") {
            let value = lowered.dropFirst(17).trimmingCharacters(in: .whitespacesAndNewlines)
            encoding = value.isEmpty || value == "identity" ? nil : value
        } else if lowered.hasPrefix("content-length:") {
            contentLength = Int64(lowered.dropFirst(15).trimmingCharacters(in: .whitespacesAndNewlines))
        } else if lowered.hasPrefix("etag:") {
            etag = line.dropFirst(5).trimmingCharacters(in: .whitespacesAndNewlines)
        } else if lowered.hasPrefix("content-range:") {
            (contentRangeStart, contentRangeEnd, contentRangeTotal) = Self.contentRange(lowered.dropFirst(14))
        }
        return count
    }
}

extension TransferContext {
    /// The parts of a `Content-Range` value, `bytes <first>-<last>/<length>` or
    /// `bytes */<length>` (RFC 9110 14.4): each one that is a whole number, else nil (`*`, absent
    /// or malformed; all nil for another unit).
    static func contentRange(_ value: Substring) -> (first: Int64?, last: Int64?, length: Int64?) {
        let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.hasPrefix("bytes ") else { return (nil, nil, nil) }
        let rest = trimmed.dropFirst(6)
        let slash = rest.firstIndex(of: "/")
        let range = rest[..<(slash ?? rest.endIndex)]
        let length = slash.flatMap { wholeNumber(rest[rest.index(after: $0)...]) }
        guard let dash = range.firstIndex(of: "-") else { return (nil, nil, length) }
        return (wholeNumber(range[..<dash]), slash == nil ? nil : wholeNumber(range[range.index(after: dash)...]), length)
    }

    private static func wholeNumber(_ text: Substring) -> Int64? {
        let digits = text.trimmingCharacters(in: .whitespaces)
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int64(digits)
    }
}

enum CurlCallbacks {
    static let write: cairn_curl_data_callback = { data, size, count, context in
        guard let data, let context else { return 0 }
        return Unmanaged<TransferContext>.fromOpaque(context).takeUnretainedValue().receive(data, size * count)
    }
    static let header: cairn_curl_data_callback = { data, size, count, context in
        guard let data, let context else { return 0 }
        return Unmanaged<TransferContext>.fromOpaque(context).takeUnretainedValue().header(data, size * count)
    }
    static let progress: cairn_curl_progress_callback = { context, _, _, _, _ in
        guard let context else { return 0 }
        let transfer = Unmanaged<TransferContext>.fromOpaque(context).takeUnretainedValue()
        return transfer.cancelled.load(ordering: .relaxed) || !transfer.keepsPace() ? 1 : 0
    }
}
