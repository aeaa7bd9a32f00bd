import Foundation
import Synchronization

/// Counts the trials of one injected fault and prints the suite's one line per fault:
/// `fault: <name> — held <held>/<trials> (<what held>)`, plus the first failures when some did
/// not hold. With `CAIRN_FAULT_REPORT=FILE` the line is also appended to FILE (the README's
/// table is made from it). Tests then `#expect(report.finish(...))`.
public final class FaultReport: Sendable {
    public let name: String
    private let tally = Mutex<(trials: Int, held: Int, failures: [String])>((0, 0, []))

    public init(_ name: String) { self.name = name }

    /// Records one trial; `failure` says what broke when it did not hold.
    public func record(_ held: Bool, _ failure: @autoclosure () -> String = "") {
        tally.withLock {
            $0.trials += 1
            if held { $0.held += 1 } else { $0.failures.append(failure()) }
        }
    }

    /// Runs one trial: it held when `body` returns nil; otherwise (or when it throws) the
    /// returned text says what broke.
    public func trial(_ number: Int, _ body: () async throws -> String?) async {
        do {
            let problem = try await body()
            record(problem == nil, "trial \(number): \(problem ?? "")")
        } catch {
            record(false, "trial \(number): \(error)")
        }
    }

    public var trials: Int { tally.withLock { $0.trials } }
    public var held: Int { tally.withLock { $0.held } }

    /// Prints (and files) the line; true when there was at least one trial and every one held.
    @discardableResult
    public func finish(_ what: String) -> Bool {
        let (trials, held, failures) = tally.withLock { ($0.trials, $0.held, $0.failures) }
        var line = "fault: \(name) — held \(held)/\(trials) (\(what))"
        if !failures.isEmpty { line += " FAILED: " + failures.prefix(3).joined(separator: "; ") }
        print(line)
        if let file = ProcessInfo.processInfo.environment["CAIRN_FAULT_REPORT"], !file.isEmpty {
            let handle = FileHandle(forWritingAtPath: file) ?? {
                FileManager.default.createFile(atPath: file, contents: nil)
                return FileHandle(forWritingAtPath: file)
            }()
            handle?.seekToEndOfFile()
            handle?.write(Data((line + "\n").utf8))
            try? handle?.close()
        }
        return trials > 0 && held == trials
    }
}
