import CairnSearch
import CairnThreads
import CairnStore
import Foundation
import Hummingbird
import Logging
import NIOCore

/// A request's context, with the connection it came on: rollback and export ask the kernel who
/// is calling (`SO_PEERCRED`) before they change anything.
struct DaemonRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}

/// Who is on the other end of a connection to the socket, as the kernel recorded it when the
/// caller connected.
struct SocketCaller: Sendable, Equatable {
    var uid: uid_t
    var pid: pid_t

    /// The caller of `channel`; nil when the kernel cannot say (not a Unix socket).
    static func of(_ channel: any Channel) async -> SocketCaller? {
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        // Linux's `struct ucred` (pid, uid, gid: three 32-bit fields), which Glibc's module
        // leaves out without _GNU_SOURCE; a homogeneous tuple is laid out as the C array would be.
        guard let credentials: (UInt32, UInt32, UInt32) = try? await provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED)).get() else { return nil }
        return SocketCaller(uid: credentials.1, pid: pid_t(bitPattern: credentials.0))
    }

    /// cairnd's own user and root may change what the device serves; the socket's group, which
    /// may query, may not (protocol/threat-model.md, "Local callers of the daemon socket").
    /// The overflow uid (nobody, 65534) is never cairnd's own: the kernel reports every caller
    /// from a user namespace that does not map its user as that uid.
    var isOperator: Bool { uid == 0 || (uid == geteuid() && uid != Self.overflowUID) }

    /// `isOperator`, or a member of group `gid` (`operator_group`) as the group database lists
    /// the caller's user; never the overflow uid.
    func mayOperate(operatorGroup gid: gid_t?) -> Bool {
        isOperator || (gid.map { uid != Self.overflowUID && FileSystem.isMember(uid, ofGroup: $0) } ?? false)
    }

    /// The kernel's overflow uid (/proc/sys/kernel/overflowuid; 65534 unless changed).
    static let overflowUID: uid_t = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/overflowuid", encoding: .utf8),
              let value = uid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return 65534 }
        return value
    }()

    /// "user cairn (uid 998)", or "uid 998" for a uid with no name here.
    static func describe(_ uid: uid_t) -> String {
        FileSystem.userName(of: uid).map { "user \($0) (uid \(uid))" } ?? "uid \(uid)"
    }
}

extension DaemonAPI {
    /// Who may ask for an action that changes the device.
    enum Operators {
        /// Rollback: cairnd's user, root, and `operator_group`'s members.
        case withGroup
        /// Export, which writes wherever cairnd's user may: cairnd's user and root only.
        case cairndsUserAndRoot
    }

    /// Refuses `action` (rollback, export) to a caller that `operators` does not name, with 403
    /// `forbidden`, before its body is read; logs who asked either way. The user and group
    /// look-ups (which may ask a directory service) run on a thread of their own.
    func requireOperator(_ context: DaemonRequestContext, for action: String, _ operators: Operators) async throws(APIError) {
        guard let caller = await SocketCaller.of(context.channel) else {
            logger.warning("\(action) refused: the caller's user is unknown", metadata: ["cairn.error": "forbidden"])
            throw APIError(403, "forbidden", "\(action) is refused: cairnd cannot tell which user is calling")
        }
        let metadata: Logger.Metadata = ["cairn.caller.uid": "\(caller.uid)", "cairn.caller.pid": "\(caller.pid)"]
        let groupName = operators == .withGroup ? operatorGroup : nil
        let refusal: (allowed: String, asking: String, missingGroup: Bool)? = await BackgroundWork.run {
            let group = groupName.flatMap(FileSystem.groupID(named:))
            if caller.mayOperate(operatorGroup: group) { return nil }
            var allowed = geteuid() == 0 ? "root (cairnd's user)"
                : geteuid() == SocketCaller.overflowUID ? "root (cairnd runs as the overflow uid, which any unmapped caller shows as)"
                : "cairnd's user (\(SocketCaller.describe(geteuid()))) or root"
            if let groupName, group != nil { allowed += " or a member of group \(groupName) (operator_group, as `id USER` lists it)" }
            return (allowed, SocketCaller.describe(caller.uid), groupName != nil && group == nil)
        }
        guard let refusal else {
            logger.info("\(action) asked", metadata: metadata)
            return
        }
        if refusal.missingGroup, let groupName {
            logger.warning("operator_group \(groupName) names no group on this system; only root and cairnd's user may roll back")
        }
        logger.warning("\(action) refused to \(refusal.asking): only \(refusal.allowed) may ask", metadata: metadata.merging(["cairn.error": "forbidden"]) { $1 })
        throw APIError(403, "forbidden", "\(action) is only for \(refusal.allowed), and this caller is \(refusal.asking): "
                       + "run it with sudo or as that user (the socket's group may query, not change what the device serves)")
    }
}
