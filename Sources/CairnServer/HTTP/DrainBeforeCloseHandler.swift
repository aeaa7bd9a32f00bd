import NIOCore

/// Holds a connection's close until the writes queued before it have reached the socket (or for
/// at most `limit`), so that graceful shutdown never cuts a download short.
///
/// Why: during graceful shutdown Hummingbird 2.28.1's `HTTPConnectionStateHandler` answers the
/// last response part with `writeAndFlush(end)` immediately followed by `close()`, and NIO's
/// close drops whatever is still queued in the channel's outbound buffer. A client reading a
/// large blob slower than the server sends then receives a truncated body (the shutdown test
/// saw 2-8 MB of a 32 MB blob lost). This handler sits below that one in the pipeline.
final class DrainBeforeCloseHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = Any
    typealias OutboundOut = Any

    private let limit: TimeAmount
    /// Completes once the newest write (and so every earlier one) has been written.
    private var lastWrite: EventLoopFuture<Void>?
    /// Writes handed on and not yet completed.
    private var pendingWrites = 0

    init(limit: TimeAmount) { self.limit = limit }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let tracked = promise ?? context.eventLoop.makePromise()
        lastWrite = tracked.futureResult
        pendingWrites += 1
        tracked.futureResult.assumeIsolated().whenComplete { _ in self.pendingWrites -= 1 }
        context.write(data, promise: tracked)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard let lastWrite, pendingWrites > 0 else {
            context.close(mode: mode, promise: promise)
            return
        }
        let loop = context.eventLoop.assumeIsolated()
        var forwarded = false
        let forward = {
            if forwarded { return }
            forwarded = true
            context.close(mode: mode, promise: promise)
        }
        let deadline = loop.scheduleTask(in: limit) { forward() }
        lastWrite.assumeIsolated().whenComplete { _ in
            deadline.cancel()
            forward()
        }
    }
}
