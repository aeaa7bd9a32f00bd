import CairnCore
import CairnServer
import Foundation
import Logging
import ServiceLifecycle

/// A repository folder in a fresh temporary directory, beside a `secret` file outside it:
/// a manifest, a version manifest, one random blob, a public key, and the publisher's
/// leftovers that must never be served (`.publish.lock`, a `.tmp-` file).
struct TestRepository {
    let base: URL
    var root: URL { base.appendingPathComponent("repo") }
    let manifest = Array(#"{"channel":"stable","version":3}"#.utf8)
    let blob: [UInt8]
    var blobHex: String { ContentID(hashing: blob).hex }
    var blobPath: String { "/blobs/sha256/\(blobHex.prefix(2))/\(blobHex)" }

    init(blobSize: Int = 300_000) throws {
        base = FileManager.default.temporaryDirectory.appendingPathComponent("cairn-serve-\(UUID().uuidString)")
        var generator = SystemRandomNumberGenerator()
        let words = (0..<(blobSize + 7) / 8).map { _ in generator.next() as UInt64 }
        blob = Array(words.withUnsafeBytes { $0.prefix(blobSize) })
        try write("repo/channels/stable/manifest.json", manifest)
        try write("repo/channels/stable/versions/3.json", manifest)
        try write("repo/keys/publisher.pub", Array("cairn-ed25519-public-v1 AAAA\n".utf8))
        try write("repo/channels/stable/.publish.lock", [1])
        try write("repo/blobs/sha256/\(blobHex.prefix(2))/.tmp-123", [2])
        try write("repo/\(blobPath.dropFirst())", blob)
        try write("secret", Array("top secret\n".utf8))
    }

    func write(_ relative: String, _ bytes: [UInt8]) throws {
        let url = base.appendingPathComponent(relative)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(bytes).write(to: url)
    }

    func remove() { try? FileManager.default.removeItem(at: base) }
}

/// Runs a real server for `repository` on 127.0.0.1, port 0, for the duration of `body`, then
/// shuts it down gracefully and waits for it to stop.
func withServer<T: Sendable>(
    _ repository: TestRepository,
    logger: Logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
    configure: (inout ServerConfiguration) -> Void = { _ in },
    _ body: @Sendable (_ port: Int) async throws -> T
) async throws -> T {
    var configuration = ServerConfiguration(repository: repository.root.path)
    configuration.port = 0
    configure(&configuration)
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let server = try buildServer(configuration: configuration, logger: logger) { continuation.yield($0) }
    let group = ServiceGroup(configuration: .init(services: [server], logger: logger))
    return try await withThrowingTaskGroup(of: T?.self) { tasks in
        tasks.addTask { try await group.run(); return nil }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw TestFailure("server never started") }
        do {
            let result = try await body(port)
            await group.triggerGracefulShutdown()
            while let next = try await tasks.next() { if next != nil { break } }
            return result
        } catch {
            await group.triggerGracefulShutdown()
            throw error
        }
    }
}
