public import NIOCore
public import NIOHTTPTypes

/// Closes a connection whose client holds its slot while showing Hummingbird's idle timer
/// activity, or while that timer is stopped: a request body sent a byte at a time (every part
/// resets the timer), a body still sent after the 413 that refused it (the rest is read and
/// dropped, part by part), a client that sends requests and never reads the answers (the timer
/// waits for the response to be written, which its full buffer stops: a download that has
/// stalled). A request must arrive whole within `limit` (`idle_timeout`) of its head, and a
/// connection that cannot be written to is closed once no write has completed for
/// `stallLimit` (a slow link that still reads keeps its download: a write is a whole chunk of
/// the answer, 128 KiB of a file, so the longest chunk a link must take within it sets the
/// slowest rate kept). A request that arrived whole may take any time to answer.
public final class RequestDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = HTTPRequestPart
    public typealias InboundOut = HTTPRequestPart
    public typealias OutboundIn = Any
    public typealias OutboundOut = Any

    private let limit: TimeAmount
    private let stallLimit: TimeAmount
    private var reading: Scheduled<Void>?
    private var blocked: Scheduled<Void>?

    /// - Parameter stallLimit: how long a blocked connection may go without a completed write
    ///   (default `limit`).
    public init(limit: TimeAmount, stallLimit: TimeAmount? = nil) {
        self.limit = limit
        self.stallLimit = stallLimit ?? limit
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            reading?.cancel()
            reading = closing(context, after: limit)
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
            self.blocked = self.closing(context, after: self.stallLimit)
        }
        context.write(data, promise: tracked)
    }

    public func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            blocked?.cancel()
            blocked = nil
        } else if blocked == nil {
            blocked = closing(context, after: stallLimit)
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

    private func closing(_ context: ChannelHandlerContext, after delay: TimeAmount) -> Scheduled<Void> {
        context.eventLoop.assumeIsolated().scheduleTask(in: delay) { context.close(promise: nil) }
    }

    private func cancel() {
        reading?.cancel()
        blocked?.cancel()
        (reading, blocked) = (nil, nil)
    }
}
