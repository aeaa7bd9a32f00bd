public import NIOCore
public import NIOHTTPTypes

/// Closes a connection whose client holds its slot while showing Hummingbird's idle timer
/// activity, or while that timer is stopped: a request body sent a byte at a time (every part
/// resets the timer), a body still sent after the 413 that refused it (the rest is read and
/// dropped, part by part), a client that sends requests and never reads the answers (the timer
/// waits for the response to be written, which its full buffer stops: a download that has
/// stalled). Each gets `limit` (`idle_timeout`): a request must arrive whole within `limit` of
/// its head, and a connection that cannot be written to is closed once no write has completed
/// for `limit` (a slow link that still reads keeps its download). A request that arrived whole
/// may take any time to answer.
public final class RequestDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = HTTPRequestPart
    public typealias InboundOut = HTTPRequestPart
    public typealias OutboundIn = Any
    public typealias OutboundOut = Any

    private let limit: TimeAmount
    private var reading: Scheduled<Void>?
    private var blocked: Scheduled<Void>?

    public init(limit: TimeAmount) {
        self.limit = limit
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            reading?.cancel()
            reading = closing(context)
        case .end:
            reading?.cancel()
            reading = nil
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let tracked = promise ?? context.eventLoop.makePromise()
        // A write that completes is the client reading: the stall's clock starts again.
        tracked.futureResult.assumeIsolated().whenSuccess { _ in
            guard let blocked = self.blocked else { return }
            blocked.cancel()
            self.blocked = self.closing(context)
        }
        context.write(data, promise: tracked)
    }

    public func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            blocked?.cancel()
            blocked = nil
        } else if blocked == nil {
            blocked = closing(context)
        }
        context.fireChannelWritabilityChanged()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        cancel()
        context.fireChannelInactive()
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        cancel()
    }

    private func closing(_ context: ChannelHandlerContext) -> Scheduled<Void> {
        context.eventLoop.assumeIsolated().scheduleTask(in: limit) { context.close(promise: nil) }
    }

    private func cancel() {
        reading?.cancel()
        blocked?.cancel()
        (reading, blocked) = (nil, nil)
    }
}
