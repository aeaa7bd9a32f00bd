public import NIOCore
public import NIOHTTP1
import NIOHTTPTypesHTTP1

/// An HTTP/1.0 request asks for the connection to close after its answer unless it says
/// `Connection: keep-alive` (RFC 9112, 9.3), and its client reads the answer to the end of the
/// stream. The HTTP types the server works in carry no version, so without this the
/// connection stayed open until `idle_timeout` and such a client waited for it. This marks
/// such a request `Connection: close`, which the server honours.
public final class HTTP10CloseHandler: ChannelInboundHandler, RemovableChannelHandler {
    public typealias InboundIn = HTTPServerRequestPart
    public typealias InboundOut = HTTPServerRequestPart

    public init() {}

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data), head.version == .http1_0, !head.isKeepAlive else {
            context.fireChannelRead(data)
            return
        }
        head.headers.replaceOrAdd(name: "connection", value: "close")
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }
}

/// Added where the server lets a handler in (after the HTTP/1 codec), it puts an
/// `HTTP10CloseHandler` before the codec, where the version is still known, and removes itself.
public final class HTTP10CloseInstaller: ChannelInboundHandler, RemovableChannelHandler {
    public typealias InboundIn = NIOAny

    public init() {}

    public func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        if let codec = try? pipeline.handler(type: HTTP1ToHTTPServerCodec.self) {
            try? pipeline.addHandler(HTTP10CloseHandler(), position: .before(codec))
        }
        pipeline.removeHandler(context: context, promise: nil)
    }
}
