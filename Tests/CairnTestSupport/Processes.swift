public import Foundation
import Synchronization

/// The built executables (`cairnd`, `cairn`) beside the test bundle.
public enum Products {
    public static let directory: URL = {
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        // …/debug/CairnPackageTests.xctest (a file on Linux, a bundle folder on macOS)
        while !url.lastPathComponent.hasSuffix(".xctest") && url.pathComponents.count > 1 { url.deleteLastPathComponent() }
        return url.deletingLastPathComponent()
    }()

    public static func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
}

/// Output of a finished process.
public struct Finished: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
}

/// A clean environment for the child: no CAIRN_* from the developer's shell.
public func childEnvironment(_ extra: [String: String] = [:]) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("CAIRN_") }
    environment.merge(extra) { $1 }
    return environment
}

/// A pipe for one child's output, made close-on-exec from the start (pipe2): only that child
/// holds its write end (the spawn's dup2 onto 1 or 2 clears the flag there), not a process
/// another test starts meanwhile. Foundation closes a child's other descriptors from a list
/// taken before the spawn, so a pipe made by another thread just after that list was taken was
/// inherited: a cairnd started while `cairn sync --wait` ran kept the write end of cairn's
/// output open, reading it to its end waited for that cairnd, which the test stopped only after
/// the read, and the suite hung. Hand `fileHandleForWriting` to the child, then call
/// `started()` once it runs (the parent's write end closed, so the reader sees the end).
public final class ChildPipe: @unchecked Sendable {
    // @unchecked: FileHandles, each read from or closed by one thread.
    public let fileHandleForReading: FileHandle
    public let fileHandleForWriting: FileHandle

    /// glibc's pipe2, which Swift's Glibc module does not declare.
    private static let pipe2: @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32 = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pipe2") else { fatalError("pipe2 is not in libc") }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32).self)
    }()

    public init() {
        var ends: [Int32] = [-1, -1]
        precondition(Self.pipe2(&ends, O_CLOEXEC) == 0, "pipe2: \(String(cString: strerror(errno)))")
        fileHandleForReading = FileHandle(fileDescriptor: ends[0], closeOnDealloc: true)
        fileHandleForWriting = FileHandle(fileDescriptor: ends[1], closeOnDealloc: true)
    }

    /// The child runs: the parent's copy of the write end goes.
    public func started() { try? fileHandleForWriting.close() }
}

public func childPipe() -> ChildPipe { ChildPipe() }

/// One spawn at a time in the test process. Foundation's `Process.run()` makes descriptors of
/// its own for each child (a socket pair whose closing tells it the child exited) without
/// close-on-exec, and closes the others in the child from a list taken before the spawn: a
/// process spawned by another thread at that moment inherited them. A cairnd started while
/// `cairn sync --wait` was being spawned kept cairn's socket open, so Foundation never saw cairn
/// exit, `waitUntilExit` waited for that cairnd, which the test stopped only afterwards, and the
/// suite hung (2026-12-06, `CommandLineTests.syncWaitRidesOutAStartingDaemon`).
private let spawning = NSLock()

extension Process {
    /// `run()`, never beside another spawn of this test process (see `spawning`).
    public func spawn() throws {
        spawning.lock()
        defer { spawning.unlock() }
        try run()
    }
}

/// Starts `executable` and returns the running process (stdout and stderr to `daemon.log` in
/// `logDirectory`). `wrapper`: a program and its arguments that start it (and exec it), e.g.
/// `["/bin/sh", "-c", "ulimit -n 300 && exec \"$0\" \"$@\""]`.
public func launch(_ executable: String, _ arguments: [String], logDirectory: String, environment: [String: String] = childEnvironment(),
                   through wrapper: [String] = []) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: wrapper.first ?? executable)
    process.arguments = wrapper.isEmpty ? arguments : Array(wrapper.dropFirst()) + [executable] + arguments
    process.environment = environment
    _ = FileManager.default.createFile(atPath: logDirectory + "/daemon.log", contents: nil)
    // One open file for both: two would each write from their own offset, over each other's lines.
    let log = FileHandle(forWritingAtPath: logDirectory + "/daemon.log")
    process.standardOutput = log
    process.standardError = log
    try process.spawn()
    return process
}

/// Runs `executable` to completion on its own thread; past `seconds` it is killed and
/// `ProcessTimedOut` thrown.
public func run(_ executable: String, _ arguments: [String], environment: [String: String] = childEnvironment(),
               seconds: Double = ProcessDeadline.defaultSeconds) async throws -> Finished {
    try await onThread {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        let out = childPipe(), err = childPipe()
        process.standardOutput = out.fileHandleForWriting
        process.standardError = err.fileHandleForWriting
        try process.spawn()
        out.started()
        err.started()
        let deadline = ProcessDeadline(process, seconds: seconds)
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        try deadline.wait(what: executable)
        return Finished(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                        stderr: String(decoding: stderr, as: UTF8.self))
    }
}

/// A child process that must exit within `seconds`: past them it is killed (SIGKILL), and
/// `wait` throws, so that a process that should have exited (a start that must be refused,
/// a command that must end) fails its test instead of hanging the whole run.
public final class ProcessDeadline {
    /// Long enough for any command a test runs to its end (an eval over a real collection).
    public static let defaultSeconds: Double = 900
    private let process: Process
    private let seconds: Double
    private let timer: any DispatchSourceTimer
    private final class Fired: Sendable { let value = Mutex(false) }
    private let fired = Fired()

    /// Starts counting for `process`, which is running.
    public init(_ process: Process, seconds: Double) {
        self.process = process
        self.seconds = seconds
        timer = DispatchSource.makeTimerSource(queue: .global())
        let pid = process.processIdentifier
        timer.schedule(deadline: .now() + seconds)
        timer.setEventHandler { [fired] in
            fired.value.withLock { $0 = true }
            kill(pid, SIGKILL)
        }
        timer.resume()
    }

    /// Waits for the process to exit; throws `ProcessTimedOut` when the deadline killed it.
    public func wait(what: String) throws {
        process.waitUntilExit()
        timer.cancel()
        // The timer may fire between the exit and the cancel: only a death by its SIGKILL counts.
        if fired.value.withLock({ $0 }), process.terminationReason == .uncaughtSignal, process.terminationStatus == SIGKILL {
            throw ProcessTimedOut(what: what, seconds: seconds)
        }
    }
}

/// A child process that did not exit in time (`ProcessDeadline`).
public struct ProcessTimedOut: Error, CustomStringConvertible {
    public let what: String
    public let seconds: Double
    public var description: String { "\(what) did not exit within \(Int(seconds)) s; killed" }
}

/// Waits for `process` to exit, at most `seconds`; its exit status (or the signal that ended it).
/// The kernel is asked too: Foundation clears `isRunning` only once its own threads have seen
/// the exit (end of file on a descriptor the child holds, then `waitpid`), which lags when a
/// child started at the same instant by another test inherited that descriptor.
public func waitForExit(_ process: Process, seconds: Double = 20) async throws -> Int32 {
    let pid = process.processIdentifier
    var status: Int32?
    try await waitUntil("the process exits", seconds: seconds) {
        if !process.isRunning {
            status = process.terminationStatus
        } else {
            status = exitedStatus(pid)
        }
        return status != nil
    }
    return status ?? -1
}

/// The status of child `pid` if it has exited and is not yet reaped (left for Foundation to
/// reap: `WNOWAIT`); nil while it runs, or once reaped (`isRunning` then turns false).
func exitedStatus(_ pid: pid_t) -> Int32? {
    var info = siginfo_t()
    guard waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0,
          info._sifields._sigchld.si_pid == pid else { return nil }
    return info._sifields._sigchld.si_status
}

/// Runs blocking work (a socket client, a child process) on its own thread, so it never
/// occupies one of the few cooperative threads that in-process servers need.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.start()
    }
}

/// What `waitUntil` throws when its deadline passes.
public struct TimedOut: Error, CustomStringConvertible {
    public let description: String
}

/// Polls `condition` until it holds or `seconds` pass (then throws `TimedOut`): how tests wait
/// for another process, never with a fixed sleep.
public func waitUntil(_ what: String, seconds: Double = 20, _ condition: () async -> Bool) async throws {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    // The condition is asked once more after a sleep that crossed the deadline: when the
    // parallel suite starves this task for longer than `seconds`, the wait would otherwise end
    // having asked only before the starvation.
    while true {
        if await condition() { return }
        guard ContinuousClock.now < deadline else { throw TimedOut(description: "timed out waiting until \(what)") }
        try await Task.sleep(for: .milliseconds(20))
    }
}
