import CairnStore
import Foundation

/// The one error type of CairnSync: an opaque, stable `code`, a one-line `message` (never
/// document or query text), an optional `cause`, and whether trying again later may help.
public struct SyncError: Error, Sendable, CustomStringConvertible {
    /// A stable, machine-readable code (protocol/data-directory.md lists them).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        init(_ name: String) { self.name = name }
        public var description: String { name }

        /// No answer from the source: DNS, connect, TLS, timeout, low speed, cut connection.
        public static let network = Code("network")
        /// The source answered with a status other than 200/206/304.
        public static let httpStatus = Code("http_status")
        /// More bytes than the manifest (or the manifest cap) allows.
        public static let sizeExceeded = Code("size_exceeded")
        /// A blob's SHA-256 differs from the one its manifest names.
        public static let hashMismatch = Code("hash_mismatch")
        /// A private source refused the credentials (HTTP 401 or 403), or a token file cannot be read.
        public static let unauthorized = Code("unauthorized")
        /// TLS with the source failed: its certificate does not verify (ca_bundle), or it wants a
        /// client certificate it did not get or accept (client_cert, client_key).
        public static let tls = Code("tls")
        /// The manifest's signature, key or shape is not acceptable.
        public static let manifestRefused = Code("manifest_refused")
        /// Fewer distinct signing keys of the trusted root signed the manifest than its threshold.
        public static let thresholdNotMet = Code("threshold_not_met")
        /// The manifest is signed only by keys a root rotation revoked.
        public static let keyRevoked = Code("key_revoked")
        /// A root offered by the source does not chain from the trusted root (protocol/root.md).
        public static let rootRefused = Code("root_refused")
        /// The newest trusted root has expired and `expired_updates = refuse`.
        public static let rootExpired = Code("root_expired")
        public static let channelMismatch = Code("channel_mismatch")
        /// The manifest's version is not greater than the installed one.
        public static let rollback = Code("rollback")
        /// The manifest is past its `expires` and `expired_updates = refuse` (freeze protection).
        public static let expired = Code("expired")
        public static let unsupportedFormat = Code("unsupported_format")
        /// The model's dimension differs from the installed one and no full snapshot can be used.
        public static let modelIncompatible = Code("model_incompatible")
        /// Not enough free disk for the download and the install beside the live version.
        public static let diskFull = Code("disk_full")
        /// The new version does not fit beside the live one within `max_disk_bytes`.
        public static let diskBudget = Code("disk_budget")
        /// Decompressing, copying or applying failed (including a decompression bomb).
        public static let installFailed = Code("install_failed")
        public static let stateRootMismatch = Code("state_root_mismatch")
        public static let canaryFailed = Code("canary_failed")
        /// Another process holds the data directory's lock.
        public static let locked = Code("locked")
        public static let io = Code("io")
        public static let cancelled = Code("cancelled")
        /// No source is configured.
        public static let noSource = Code("no_source")
        /// Rollback: the data directory keeps no previous version.
        public static let noPreviousVersion = Code("no_previous_version")
        /// Rollback: the previous version fails verification.
        public static let previousUnusable = Code("previous_unusable")
        /// Export: nothing is installed.
        public static let notInstalled = Code("not_installed")
        /// Export: the target is not an absolute path.
        public static let badPath = Code("bad_path")
        /// Export: the target folder exists and is not empty.
        public static let exportTargetNotEmpty = Code("export_target_not_empty")
        /// Export: the exact signed snapshot bytes cannot be produced on this device.
        public static let exportUnreproducible = Code("export_unreproducible")
        /// The installed version meets no trust the export carries: no device would install it.
        public static let exportUntrusted = Code("export_untrusted")
    }

    public let code: Code
    public let message: String
    public let cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    /// A system call that failed (`errno` read at the call): `disk_full` when the disk filled,
    /// else `io`; the message ends with the system's reason.
    static func system(_ what: String, _ code: Int32 = errno) -> SyncError {
        SyncError([ENOSPC, EDQUOT, EFBIG].contains(code) ? .diskFull : .io, "\(what): \(String(cString: strerror(code)))")
    }

    /// A file operation that failed: `disk_full` when the disk filled, else `io`.
    static func writing(_ message: String, _ error: any Error & Sendable) -> SyncError {
        SyncError((error as? StoreError)?.code == .diskFull ? .diskFull : .io, message, cause: error)
    }

    /// Network trouble, HTTP errors, full disks and I/O may pass; a refused manifest or a
    /// failing canary will not change until the publisher publishes again.
    public var isRetryable: Bool {
        [.network, .httpStatus, .diskFull, .io, .cancelled, .hashMismatch].contains(code)
    }

    /// Whether the failure is about reaching a source rather than about what it served (a
    /// damaged copy, or a blob refused to the device's credentials, which may be credentials
    /// that do not reach it, is an answer).
    var isTransport: Bool {
        (code == .network || code == .httpStatus || code == .cancelled) && !isDamagedCopy
            && (cause as? Downloader.NotHeld)?.forbidden != true
    }

    /// Whether the source served a damaged copy: one that fails its SHA-256, or is not even the
    /// signed size (an HTTP answer, coded `http_status`, whose cause says so).
    var isDamagedCopy: Bool { code == .hashMismatch || cause is Downloader.WrongSize }

    public var description: String { "\(code): \(message)" }
}
