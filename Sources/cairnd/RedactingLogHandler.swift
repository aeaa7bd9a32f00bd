import CairnCore
import Logging

/// A log handler that hides the password of every source URL in a line, its message and its
/// metadata alike (`SourceURL.redactingPasswords`), before `Wrapped` writes it: a source given as
/// `https://user:pass@host/repo` is named in many lines, and the journal's readers are not the
/// config file's.
struct RedactingLogHandler<Wrapped: LogHandler>: LogHandler {
    var wrapped: Wrapped

    var logLevel: Logger.Level {
        get { wrapped.logLevel }
        set { wrapped.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = newValue.mapValues(Self.redacting) }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: key] }
        set { wrapped[metadataKey: key] = newValue.map(Self.redacting) }
    }

    func log(event: LogEvent) {
        var event = event
        event.message = "\(SourceURL.redactingPasswords(in: event.message.description))"
        event.metadata = event.metadata?.mapValues(Self.redacting)
        wrapped.log(event: event)
    }

    static func redacting(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let text): .string(SourceURL.redactingPasswords(in: text))
        case .stringConvertible(let item): .string(SourceURL.redactingPasswords(in: item.description))
        case .dictionary(let entries): .dictionary(entries.mapValues(redacting))
        case .array(let items): .array(items.map(redacting))
        }
    }
}
