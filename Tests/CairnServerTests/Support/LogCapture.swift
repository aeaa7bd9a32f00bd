import Logging
import Synchronization

/// A log handler that keeps every entry, to check what the server logs.
struct LogCapture: LogHandler {
    struct Entry: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }

    final class Store: Sendable {
        let entries = Mutex<[Entry]>([])
    }

    let store = Store()
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    var entries: [Entry] { store.entries.withLock { $0 } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String,
             file: String, function: String, line: UInt) {
        let flat = (metadata ?? [:]).mapValues { "\($0)" }
        store.entries.withLock { $0.append(Entry(level: level, message: message.description, metadata: flat)) }
    }
}
