public import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension FileSystem {
    /// The name of the user with `uid` (getpwuid_r: callers run on several threads), or nil when
    /// this system has none.
    public static func userName(of uid: uid_t) -> String? {
        var entry = passwd(), found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &found) == 0, found != nil, let name = entry.pw_name else { return nil }
        return String(cString: name)
    }
}
