import Foundation
public import Testing

/// The one rule for a test that needs something outside the package (the real model, the
/// Python reference venv, nginx, curl, python3, root): where the part is missing, the test
/// never passes. It is skipped, which Swift Testing records and prints with the reason, or, when
/// `CAIRN_REQUIRE_MODEL=1` (scripts/test and CI set it), it fails, saying what to install.
///
/// Call it at the top of the test, before anything is checked, rather than an
/// `.enabled(if:)` trait: a disabled test is skipped even where the suite must run whole.
public enum Requirement {
    /// True where every test must run (`CAIRN_REQUIRE_MODEL=1`): a missing part fails.
    public static var enforced: Bool { ProcessInfo.processInfo.environment["CAIRN_REQUIRE_MODEL"] == "1" }
}

/// A part the test needs is missing where the suite must run whole (thrown: the test fails).
public struct MissingRequirement: Error, CustomStringConvertible {
    public let description: String
}

/// Returns when `present`; otherwise skips the test with `missing` as the reason, or throws
/// `MissingRequirement` when `Requirement.enforced`.
public func requireOrSkip(_ present: Bool, _ missing: @autoclosure () -> String,
                          sourceLocation: SourceLocation = #_sourceLocation) throws {
    if present { return }
    let reason = missing()
    if Requirement.enforced {
        throw MissingRequirement(description: "\(reason) (CAIRN_REQUIRE_MODEL=1: every test must run)")
    }
    try Test.cancel(Comment(rawValue: reason), sourceLocation: sourceLocation)
}

/// The value when present; otherwise as `requireOrSkip(_:_:)` with `false`.
public func requireOrSkip<Value>(_ value: Value?, _ missing: @autoclosure () -> String,
                                 sourceLocation: SourceLocation = #_sourceLocation) throws -> Value {
    if let value { return value }
    try requireOrSkip(false, missing(), sourceLocation: sourceLocation)
    fatalError("unreachable: requireOrSkip(false, …) throws")
}

/// What the tests run besides the built products, and how each is checked.
public enum Tools {
    /// Skips (or fails, where every test must run) unless `/usr/bin/curl` is installed.
    public static func requireCurl(sourceLocation: SourceLocation = #_sourceLocation) throws {
        try requireOrSkip(FileManager.default.isExecutableFile(atPath: "/usr/bin/curl"),
                          "curl is not installed (apt-get install curl)", sourceLocation: sourceLocation)
    }

    /// Skips unless the tests run as root; fails instead where `CAIRN_REQUIRE_ROOT=1`
    /// (scripts/test sets it when run as root, as CI does). A user with sudo (the README allows
    /// one) runs the rest: these tests mount file systems or create users.
    public static func requireRoot(_ why: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        if getuid() == 0 { return }
        let reason = "needs root to \(why); run scripts/test as root to include it"
        if ProcessInfo.processInfo.environment["CAIRN_REQUIRE_ROOT"] == "1" {
            throw MissingRequirement(description: "\(reason) (CAIRN_REQUIRE_ROOT=1)")
        }
        try Test.cancel(Comment(rawValue: reason), sourceLocation: sourceLocation)
    }

    /// As `requireRoot`, and the power to mount: root in a container run without
    /// `--privileged` (Docker's default) may not mount a tmpfs or a bind mount, nor enter a
    /// mount namespace of its own. Where it may not, the test is skipped, and fails where
    /// `CAIRN_REQUIRE_MOUNT=1` (scripts/test sets it where `unshare --mount` works).
    public static func requireMount(_ why: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try requireRoot(why, sourceLocation: sourceLocation)
        if mayMount { return }
        let reason = "needs the power to mount to \(why); root here has none (a container run without --privileged)"
        if ProcessInfo.processInfo.environment["CAIRN_REQUIRE_MOUNT"] == "1" {
            throw MissingRequirement(description: "\(reason) (CAIRN_REQUIRE_MOUNT=1)")
        }
        try Test.cancel(Comment(rawValue: reason), sourceLocation: sourceLocation)
    }

    /// Whether `unshare --mount` works here, the probe scripts/test makes too: asked once.
    private static let mayMount: Bool = {
        guard let run = try? Binaries.run("/usr/bin/unshare", ["--mount", "/bin/true"], in: "/tmp") else { return false }
        return run.status == 0
    }()
}
