#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// Writes `text` to standard error with write(2), whatever happens: a closed or broken
/// standard error (`2>&-`, a reader gone) loses the line but must not trap the program, as
/// Foundation's `FileHandle.write` does, nor change its exit status.
public func writeStandardError(_ text: String) {
    _ = writeWhole(Array(text.utf8), to: STDERR_FILENO)
}

/// Writes all of `bytes` to `descriptor` with write(2) (again after EINTR, on after a short
/// write): nil once written, else the errno that stopped it. Never traps, as Foundation's
/// `FileHandle.write` does on a full disk or a closed descriptor.
public func writeWhole(_ bytes: [UInt8], to descriptor: Int32) -> Int32? {
    var rest = bytes[...]
    while !rest.isEmpty {
        let written = rest.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { return written < 0 ? errno : EIO }
        rest = rest.dropFirst(written)
    }
    return nil
}

/// Writes `text` to standard output through stdio, as `print` does (so the two keep their
/// order), and flushes it: a failure is left in `ferror(stdout)` for the exit check of
/// `mainWithOneLineUsage`.
public func writeStandardOutput(_ text: String) {
    fputs(text, stdout)
    fflush(stdout)
}

/// After a command has run: whether everything it printed reached standard output; if not,
/// one line saying so (a script reading `cairn … > file` on a full disk, or with standard
/// output closed, must not take an empty answer for success).
/// - Returns: the line to print, or nil when the output was written.
func standardOutputFailure(program: String) -> String? {
    let flushed = fflush(stdout) == 0
    let reason = flushed ? nil : String(cString: strerror(errno))
    guard !flushed || ferror(stdout) != 0 else { return nil }
    return "\(program): cannot write standard output" + (reason.map { " (\($0))" } ?? "")
        + "; what it printed is incomplete\n"
}
