#!/usr/bin/env python3
"""A TCP relay that delivers the server's bytes at a link's rate (benchmarks only).

    slow-link.py --upstream HOST:PORT --mbit RATE [--rtt MS]

Listens on 127.0.0.1 (a free port), prints `http://127.0.0.1:PORT` on its first line, and
relays every connection to HOST:PORT. Bytes from the server to the client go through one
shared queue, as on one link: each piece is handed on when the link would have finished
sending it (its length / rate after the link is free), so a small blob costs its transfer
time as a large one does. Requests (client to server) pass unthrottled. With --rtt, a round
trip's latency as well: a new connection is relayed one round trip after it is accepted (the
TCP handshake), and every piece, either way, is handed on half a round trip after it arrived
(in order), so a request on a kept-alive connection costs one round trip and one on a new
connection two.
"""
import argparse
import asyncio
import sys
import time

PIECE = 16 * 1024
SLACK = 0.001


class Link:
    def __init__(self, bytes_per_second: float):
        self.rate = bytes_per_second
        self.free_at = 0.0  # monotonic time when the link has sent everything queued so far

    async def carry(self, size: int) -> None:
        now = time.monotonic()
        # A sleep wakes up to a millisecond late: a link kept busy does not lose that time, an
        # idle one does not bank more of it.
        self.free_at = max(self.free_at, now - SLACK) + size / self.rate
        delay = self.free_at - now
        if delay > 0:
            await asyncio.sleep(delay)


async def relay(reader, writer, link=None, delay=0.0):
    """Copies reader to writer, each piece after the link carried it and `delay` seconds later."""
    pieces = asyncio.Queue()

    async def deliver():
        while True:
            due, data = await pieces.get()
            if data is None:
                return
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.ensure_future(deliver())
    try:
        while True:
            data = await reader.read(PIECE)
            if not data:
                break
            if link is not None:
                await link.carry(len(data))
            pieces.put_nowait((time.monotonic() + delay, data))
        pieces.put_nowait((0.0, None))
        await sender
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        sender.cancel()
        try:
            writer.close()
        except Exception:
            pass


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="HOST:PORT of the server")
    parser.add_argument("--mbit", type=float, required=True, help="link rate in Mbit/s")
    parser.add_argument("--rtt", type=float, default=0.0, help="round-trip latency in ms (default 0)")
    arguments = parser.parse_args()
    host, port = arguments.upstream.rsplit(":", 1)
    link = Link(arguments.mbit * 1_000_000 / 8)
    rtt = arguments.rtt / 1000

    async def accept(client_reader, client_writer):
        if rtt > 0:
            await asyncio.sleep(rtt)  # the handshake's round trip
        try:
            server_reader, server_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(relay(client_reader, server_writer, delay=rtt / 2),
                             relay(server_reader, client_writer, link, delay=rtt / 2))

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
