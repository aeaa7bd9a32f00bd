import NIOCore
import NIOHTTPTypes

/// Closes a connection whose client holds its slot while showing Hummingbird's idle timer
/// activity, or while that timer is stopped: a request body sent a byte at a time (every part
/// resets the timer), a body still sent after the 413 that refused it (the rest is read and
/// dropped, part by part), a client that sends requests and never reads the answers (the timer
/// waits for the response to be written, which its full buffer stops). Each gets `limit`
/// (`idle_timeout`): a request must arrive whole within `limit` of its head, and a connection
/// that cannot be written to is closed after `limit`. A request that arrived whole may take any
/// time to answer.
final class RequestDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    private let limit: TimeAmount
    private var reading: Scheduled<Void>?
    private var blocked: Scheduled<Void>?

    init(limit: TimeAmount) {
        self.limit = limit
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
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

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            blocked?.cancel()
            blocked = nil
        } else if blocked == nil {
            blocked = closing(context)
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancel()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
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
