public import Logging
import Synchronization

/// A log handler that keeps every entry, to check what a component logs.
public struct LogCapture: LogHandler {
    public struct Entry: Sendable {
        public var level: Logger.Level
        public var message: String
        public var metadata: [String: String]
    }

    public final class Store: Sendable {
        let entries = Mutex<[Entry]>([])
    }

    public let store = Store()
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .trace
    public var entries: [Entry] { store.entries.withLock { $0 } }

    public init() {}

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String,
             file: String, function: String, line: UInt) {
        let flat = (metadata ?? [:]).mapValues { "\($0)" }
        store.entries.withLock { $0.append(Entry(level: level, message: message.description, metadata: flat)) }
    }
}
