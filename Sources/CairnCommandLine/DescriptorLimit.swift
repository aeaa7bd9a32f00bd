import Glibc

/// The open-descriptor limit a serving process (cairnd, `cairn-server serve`) runs under. Every
/// connection takes a descriptor, a download a second one for its file, and so do an index's
/// SQLite connections and a sync's downloads and state writes: with the table full, a search
/// fails (500), a file cannot be served and an install cannot open its files, while
/// connections wait their turn.
public enum DescriptorLimit {
    /// Descriptors kept for what is not a connection (SQLite connections of each channel's
    /// search threads, downloads, the state, an export).
    static let reserve = 256

    /// Raises the soft limit to the hard one (systemd's default soft limit is 1,024; the hard
    /// one is usually far higher), and returns the soft limit now in force (nil: unknown).
    private static func raise() -> Int? {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)  // RLIM_INFINITY, all ones, clamps to Int.max
    }

    /// Raises the limit (`raise`) and lowers `maxConnections` to the number that fits it with
    /// `reserve` to spare (at least 16), each connection taking `descriptorsEach`, passing
    /// `warn` the one line that says so; leaves it when it fits.
    public static func fit(_ maxConnections: inout Int, descriptorsEach: Int, warn: (String) -> Void) {
        let configured = maxConnections
        guard let limit = raise(), let fitting = connections(configured, within: limit, descriptorsEach: descriptorsEach) else { return }
        maxConnections = fitting
        warn("max_connections \(configured) leaves too few of the \(limit) descriptors this process may open "
             + "(\(reserve) are kept for its files, indexes and downloads); serving \(fitting) at once: "
             + "raise LimitNOFILE (ulimit -n) or lower max_connections")
    }

    /// The `max_connections` that fits `limit` with `reserve` to spare (at least 16), or nil when
    /// `configured` does.
    static func connections(_ configured: Int, within limit: Int, descriptorsEach: Int) -> Int? {
        let fitting = max(16, (limit - reserve) / descriptorsEach)
        return configured > fitting ? fitting : nil
    }

    private static var resource: __rlimit_resource_t { __rlimit_resource_t(RLIMIT_NOFILE.rawValue) }
}
