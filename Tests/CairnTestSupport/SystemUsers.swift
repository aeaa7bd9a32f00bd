public import Foundation

/// System users and groups for tests that run a program as someone else (root only: the
/// callers check `Tools.requireRoot` first). They are left in place: other test runs on the
/// machine may be using them.
public enum SystemUsers {
    /// A user that is in no group of the tests' own: for "who may read or connect" checks.
    public static let outsider = "cairn-test-outsider"

    /// The id of `group`, created as a system group if missing.
    public static func ensure(group: String) async throws -> gid_t {
        if let entry = getgrnam(group) { return entry.pointee.gr_gid }
        // Exit 9: another test run created it meanwhile.
        let made = try await run("/usr/sbin/groupadd", ["--system", group])
        guard made.status == 0 || made.status == 9, let entry = getgrnam(group) else {
            throw TestSkip("groupadd \(group) failed: \(made.stderr)")
        }
        return entry.pointee.gr_gid
    }

    /// The uid and primary gid of `user`, created as a system user without a home if missing.
    public static func ensure(user: String) async throws -> (uid_t, gid_t) {
        if let entry = getpwnam(user) { return (entry.pointee.pw_uid, entry.pointee.pw_gid) }
        let made = try await run("/usr/sbin/useradd", ["--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", user])
        guard made.status == 0 || made.status == 9, let entry = getpwnam(user) else {
            throw TestSkip("useradd \(user) failed: \(made.stderr)")
        }
        return (entry.pointee.pw_uid, entry.pointee.pw_gid)
    }

    /// `ensure(user:)`, with `group` among its supplementary groups in the group database.
    public static func ensure(user: String, memberOf group: String) async throws -> (uid_t, gid_t) {
        _ = try await ensure(group: group)
        let ids = try await ensure(user: user)
        let added = try await run("/usr/sbin/usermod", ["--append", "--groups", group, user])
        guard added.status == 0 else { throw TestSkip("usermod --append --groups \(group) \(user) failed: \(added.stderr)") }
        return ids
    }
}
