#!/usr/bin/env python3
"""A TCP relay that delivers the server's bytes at a link's rate (benchmarks only).

    slow-link.py --upstream HOST:PORT --mbit RATE

Listens on 127.0.0.1 (a free port), prints `http://127.0.0.1:PORT` on its first line, and
relays every connection to HOST:PORT. Bytes from the server to the client go through one
shared queue, as on one link: each piece is handed on when the link would have finished
sending it (its length / rate after the link is free), so a small blob costs its transfer
time as a large one does. Requests (client to server) pass unthrottled. Bandwidth only: no
added round-trip latency, which would add the same per-request delay to every sync.
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


async def relay(reader, writer, link=None):
    try:
        while True:
            data = await reader.read(PIECE)
            if not data:
                break
            if link is not None:
                await link.carry(len(data))
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="HOST:PORT of the server")
    parser.add_argument("--mbit", type=float, required=True, help="link rate in Mbit/s")
    arguments = parser.parse_args()
    host, port = arguments.upstream.rsplit(":", 1)
    link = Link(arguments.mbit * 1_000_000 / 8)

    async def accept(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(relay(client_reader, server_writer), relay(server_reader, client_writer, link))

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
