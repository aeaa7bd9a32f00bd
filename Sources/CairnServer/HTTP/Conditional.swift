import Hummingbird

/// Conditional request headers (RFC 9110 §13), evaluated for GET and HEAD.
enum Conditional {
    /// Whether the client's copy is current, so the answer is 304. `If-None-Match` wins over
    /// `If-Modified-Since`, which is only looked at when there is no `If-None-Match`, and not
    /// at all without `lastModified` (a file whose date is not to be trusted).
    static func notModified(_ headers: HTTPFields, etag: String, lastModified: Int?) -> Bool {
        let tags = headers[values: .ifNoneMatch]
        if !tags.isEmpty {
            return tags.joined(separator: ",").split(separator: ",").contains { candidate in
                let tag = candidate.trimmingWhitespace()
                return tag == "*" || (tag.hasPrefix("W/") ? tag.dropFirst(2) : tag) == etag
            }
        }
        if let lastModified, let since = headers[.ifModifiedSince].flatMap(HTTPDate.parse) {
            return lastModified <= since
        }
        return false
    }

    /// Whether a `Range` may be honoured given `If-Range`: yes without `If-Range`, or when it
    /// names the current strong ETag or the exact `Last-Modified` date (with `lastModified`).
    static func rangeApplies(_ headers: HTTPFields, etag: String, lastModified: Int?) -> Bool {
        guard let condition = headers[.ifRange] else { return true }
        if condition.hasPrefix("\"") { return condition == etag }
        return lastModified != nil && HTTPDate.parse(condition) == lastModified
    }
}
