public import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension FileSystem {
    /// The name and primary group of the user with `uid` (getpwuid_r: callers run on several
    /// threads), or nil when this system has none or its user database cannot say.
    public static func user(_ uid: uid_t) -> (name: String, group: gid_t)? {
        lookUp { entry, buffer, size, found in getpwuid_r(uid, entry, buffer, size, found) } read: { (entry: passwd) in
            entry.pw_name.map { (String(cString: $0), entry.pw_gid) }
        }
    }

    /// The name of the user with `uid`, or nil when this system has none.
    public static func userName(of uid: uid_t) -> String? {
        user(uid)?.name
    }

    /// The id of the group named `name` (getgrnam_r), or nil when this system has none or its
    /// group database cannot say.
    public static func groupID(named name: String) -> gid_t? {
        lookUp { entry, buffer, size, found in getgrnam_r(name, entry, buffer, size, found) } read: { (entry: group) in entry.gr_gid }
    }

    /// Whether the user with `uid` is a member of group `gid` as the system's group database
    /// lists it: its primary group, or a supplementary one (getgrouplist; what `id USER` says).
    /// False for a uid this system has no user for.
    public static func isMember(_ uid: uid_t, ofGroup gid: gid_t) -> Bool {
        guard let user = user(uid) else { return false }
        if user.group == gid { return true }
        var count: Int32 = 64
        while true {
            var groups = [gid_t](repeating: 0, count: Int(count))
            let capacity = count
            if getgrouplist(user.name, user.group, &groups, &count) >= 0 {
                return groups.prefix(Int(count)).contains(gid)
            }
            // Too small: `count` now holds the number needed (it grows, so this ends).
            guard count > capacity else { return false }
        }
    }

    /// A reentrant user or group database look-up (`getpwuid_r`, `getgrnam_r`): `call` fills an
    /// entry whose strings point into the buffer, which grows while the call answers ERANGE (a
    /// group with thousands of members); `read` takes what is needed while the buffer lives.
    private static func lookUp<Entry, T>(_ call: (UnsafeMutablePointer<Entry>, UnsafeMutablePointer<CChar>, Int,
                                                  UnsafeMutablePointer<UnsafeMutablePointer<Entry>?>) -> Int32,
                                         read: (Entry) -> T?) -> T? {
        var size = 4096
        while size <= 1 << 24 {
            let answer: T?? = withUnsafeTemporaryAllocation(of: Entry.self, capacity: 1) { entry in
                withUnsafeTemporaryAllocation(of: CChar.self, capacity: size) { buffer in
                    var found: UnsafeMutablePointer<Entry>?
                    let status = call(entry.baseAddress!, buffer.baseAddress!, size, &found)
                    if status == ERANGE { return nil }
                    guard status == 0, let found else { return .some(nil) }
                    return .some(read(found.pointee))
                }
            }
            if let answer { return answer }
            size *= 4
        }
        return nil
    }
}
