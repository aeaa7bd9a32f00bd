import Glibc

/// The open-descriptor limit cairnd runs under. Every connection takes a descriptor, and so do
/// the index's SQLite connections, downloads and state writes: with the table full, a search
/// fails (500) and an install cannot open its files, while connections wait their turn.
enum DescriptorLimit {
    /// Descriptors kept for what is not a connection (SQLite connections of each channel's
    /// search threads, downloads, the state, an export).
    static let reserve = 256

    /// Raises the soft limit to the hard one (systemd's default soft limit is 1,024; the hard
    /// one is usually far higher), and returns the soft limit now in force (nil: unknown).
    static func raise() -> Int? {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)  // RLIM_INFINITY, all ones, clamps to Int.max
    }

    /// The `max_connections` that fits `limit` with `reserve` to spare (at least 16), or nil when
    /// `configured` does.
    static func connections(_ configured: Int, within limit: Int) -> Int? {
        let fitting = max(16, limit - reserve)
        return configured > fitting ? fitting : nil
    }

    private static var resource: __rlimit_resource_t { __rlimit_resource_t(RLIMIT_NOFILE.rawValue) }
}
