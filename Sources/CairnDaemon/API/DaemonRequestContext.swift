import CairnSearch
import CairnStore
import CairnThreads
import Foundation
import Hummingbird
import Logging
import NIOCore
import Synchronization

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

    /// The kernel's overflow uid (/proc/sys/kernel/overflowuid; 65534 unless changed).
    static let overflowUID: uid_t = {
        guard let text = try? FileSystem.readText("/proc/sys/kernel/overflowuid"),
              let value = uid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return 65534 }
        return value
    }()
}

/// The look-ups the rollback check needs beyond the caller's uid (the operator group's id, a
/// caller's membership, a user's name), each made on a thread of its own, once for all callers
/// who ask meanwhile, and remembered for a minute: they may ask a directory service (LDAP, sssd)
/// that is slow or away on an offline device, and callers asking at once or in a loop must not
/// each ask it. A membership change counts within that minute.
actor CallerDirectory {
    /// `operator_group`, by name; nil for none.
    nonisolated let operatorGroup: String?
    private static let remembered: Duration = .seconds(60)
    /// At most this many answers are kept (one per uid that asked); past it, all are forgotten.
    private static let mostRemembered = 4096

    private enum Question: Hashable {
        case group
        case member(uid_t, of: gid_t)
        case name(uid_t)
    }
    private enum Answer: Sendable {
        case group(gid_t?)
        case member(Bool)
        case name(String)
    }
    private var answers: [Question: (answer: Answer, at: ContinuousClock.Instant)] = [:]
    private var asking: [Question: Task<Answer, Never>] = [:]

    /// How long a caller waits for a look-up (a directory that hangs, LDAP with a hard bind
    /// policy); past it, the answer that grants nothing stands for a minute.
    private let patience: Duration
    /// The group's id by name (the group database; a test stands in for a directory that hangs).
    private let groupID: @Sendable (String) -> gid_t?

    init(operatorGroup: String?, patience: Duration = .seconds(10),
         groupID: @escaping @Sendable (String) -> gid_t? = { FileSystem.groupID(named: $0) }) {
        self.operatorGroup = operatorGroup
        self.patience = patience
        self.groupID = groupID
    }

    /// The operator group's id (nil: none set, or the name resolves to no group now), and
    /// whether this call looked it up (so that a name that resolves to none is said once a minute).
    func operatorGroupID() async -> (gid: gid_t?, lookedUp: Bool) {
        guard let name = operatorGroup else { return (nil, false) }
        let groupID = self.groupID
        guard case (.group(let gid), let lookedUp) = await answer(.group, { .group(groupID(name)) }) else { return (nil, false) }
        return (gid, lookedUp)
    }

    /// Whether the user `uid` is a member of group `gid` as the group database lists it.
    func isMember(_ uid: uid_t, of gid: gid_t) async -> Bool {
        guard case (.member(let member), _) = await answer(.member(uid, of: gid), { .member(FileSystem.isMember(uid, ofGroup: gid)) }) else { return false }
        return member
    }

    /// "user cairn (uid 998)", or "uid 998" for a uid with no name here.
    func describe(_ uid: uid_t) async -> String {
        guard case (.name(let text), _) = await answer(.name(uid), { .name(FileSystem.userName(of: uid).map { "user \($0) (uid \(uid))" } ?? "uid \(uid)") }) else { return "uid \(uid)" }
        return text
    }

    /// Says at start what would surprise an operator: `operator_group` resolving to no group, or
    /// being the socket's group (`socketGroup`: `socket_group`'s id, resolved when the socket was
    /// set up, else cairnd's own), so that every caller who may query may also roll back. Off the
    /// start-up path: the directory may be slow.
    func checkAtStart(socketGroup socketGID: gid_t, logger: Logger) async {
        guard let name = operatorGroup else { return }
        let (gid, _) = await operatorGroupID()
        guard let gid else {
            logger.warning("operator_group \(name) resolves to no group (none by that name, or the group database cannot say); only root and cairnd's user may roll back until it does")
            return
        }
        if gid == socketGID {
            logger.warning("operator_group \(name) is the socket's group: every caller that may query may also roll back")
        }
    }

    /// The answer to `question`: remembered, or the look-up already under way, or a new one. One
    /// that outlasts `patience` answers `unanswered` (no group, not a member, no name), remembered
    /// as any answer is: a hung directory holds each caller `patience` at most, and starts a
    /// look-up thread at most once a minute per question.
    private func answer(_ question: Question, _ lookUp: @escaping @Sendable () -> Answer) async -> (Answer, lookedUp: Bool) {
        if let known = answers[question], ContinuousClock.now - known.at < Self.remembered { return (known.answer, false) }
        if let running = asking[question] { return (await Self.first(of: running, within: patience) ?? Self.unanswered(question), false) }
        let running = Task { await BackgroundWork.run(lookUp) }
        asking[question] = running
        let answer = await Self.first(of: running, within: patience) ?? Self.unanswered(question)
        if asking[question] == running { asking[question] = nil }
        if answers.count >= Self.mostRemembered { answers.removeAll() }
        answers[question] = (answer, .now)
        return (answer, true)
    }

    /// What grants nothing: no group, not a member, a uid with no name.
    private static func unanswered(_ question: Question) -> Answer {
        switch question {
        case .group: .group(nil)
        case .member: .member(false)
        case .name(let uid): .name("uid \(uid)")
        }
    }

    /// `task`'s answer, or nil when it takes longer than `limit` (the task runs on).
    private static func first(of task: Task<Answer, Never>, within limit: Duration) async -> Answer? {
        await withCheckedContinuation { continuation in
            let waiting = Waiting(continuation)
            let sleeper = Task {
                try? await Task.sleep(for: limit)
                waiting.resume(returning: nil)
            }
            Task {
                waiting.resume(returning: await task.value)
                sleeper.cancel()
            }
        }
    }

    /// A continuation resumed once, by whichever comes first.
    private final class Waiting: Sendable {
        private let continuation: Mutex<CheckedContinuation<Answer?, Never>?>
        init(_ continuation: CheckedContinuation<Answer?, Never>) { self.continuation = Mutex(continuation) }
        func resume(returning answer: Answer?) { continuation.withLock { $0.take() }?.resume(returning: answer) }
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
    /// `forbidden`, before its body is read; logs who asked either way. cairnd's user and root
    /// are told by the uid alone; the group's look-ups go through `callers`.
    func requireOperator(_ context: DaemonRequestContext, for action: String, _ operators: Operators) async throws(APIError) {
        guard let caller = await SocketCaller.of(context.channel) else {
            logger.warning("\(action) refused: the caller's user is unknown", metadata: ["cairn.error": "forbidden"])
            throw APIError(403, "forbidden", "\(action) is refused: cairnd cannot tell which user is calling")
        }
        let metadata: Logger.Metadata = ["cairn.caller.uid": "\(caller.uid)", "cairn.caller.pid": "\(caller.pid)"]
        var group: gid_t?
        if !caller.isOperator, operators == .withGroup, let name = callers.operatorGroup {
            let (gid, lookedUp) = await callers.operatorGroupID()
            if gid == nil, lookedUp {
                logger.warning("operator_group \(name) resolves to no group now (none by that name, or the group database cannot say); only root and cairnd's user may roll back")
            }
            group = gid
        }
        if let group, caller.uid != SocketCaller.overflowUID, await callers.isMember(caller.uid, of: group) {
            logger.info("\(action) asked by a member of operator_group", metadata: metadata)
            return
        }
        guard !caller.isOperator else {
            logger.info("\(action) asked", metadata: metadata)
            return
        }
        var allowed = geteuid() == 0 ? "root (cairnd's user)"
            : geteuid() == SocketCaller.overflowUID ? "root (cairnd runs as the overflow uid, which any unmapped caller shows as)"
            : "cairnd's user (\(await callers.describe(geteuid()))) or root"
        if group != nil, let name = callers.operatorGroup { allowed += " or a member of group \(name) (operator_group, as `id USER` lists it)" }
        let asking = await callers.describe(caller.uid)
        logger.warning("\(action) refused to \(asking): only \(allowed) may ask", metadata: metadata.merging(["cairn.error": "forbidden"]) { $1 })
        throw APIError(403, "forbidden", "\(action) is only for \(allowed), and this caller is \(asking): "
                       + "run it with sudo or as that user (the socket's group may query, not change what the device serves)")
    }
}
