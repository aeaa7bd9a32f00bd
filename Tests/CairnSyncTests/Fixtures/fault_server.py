#!/usr/bin/env python3
"""A static file server for the sync tests that produces real faults on the wire.

Serves ROOT like a dumb repository mirror (GET, HEAD, single `Range: bytes=N-` / `N-M`), and on
request misbehaves for blob paths (/blobs/...):
  --cut-after N    the first blob response sends N body bytes, then closes the connection (once)
  --stall-after N  every blob response sends N body bytes, then stops sending (keeps the socket)
  --corrupt        every blob body is served with its bytes inverted
  --status CODE    every request is answered with CODE and a short body
Each request is logged to --log as one line: "<path> <status> <range or -> <body bytes sent>".
The bound port (on 127.0.0.1, chosen by the OS) is written to --port-file once listening.
"""
import argparse
import http.server
import os
import signal
import threading

args = None
cut_done = threading.Event()
log_lock = threading.Lock()


def log(path, status, rng, sent):
    with log_lock, open(args.log, "a") as f:
        f.write(f"{path} {status} {rng or '-'} {sent}\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_HEAD(self):
        self.serve(head=True)

    def do_GET(self):
        self.serve(head=False)

    def serve(self, head):
        path = self.path.split("?")[0]
        rng = self.headers.get("Range")
        if args.status:
            body = b"fault server error\n"
            self.send_response(args.status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            log(path, args.status, rng, len(body))
            return
        full = os.path.realpath(os.path.join(args.root, path.lstrip("/")))
        if not full.startswith(os.path.realpath(args.root)) or not os.path.isfile(full):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            log(path, 404, rng, 0)
            return
        with open(full, "rb") as f:
            data = f.read()
        start, end, status = 0, len(data) - 1, 200
        if rng and rng.startswith("bytes="):
            first, _, last = rng[6:].partition("-")
            start = int(first)
            end = int(last) if last else len(data) - 1
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                log(path, 416, rng, 0)
                return
            status = 206
        body = data[start:end + 1]
        blob = path.startswith("/blobs/")
        if blob and args.corrupt:
            body = bytes(b ^ 0xFF for b in body)
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if head:
            log(path, status, rng, 0)
            return
        limit = len(body)
        if blob and args.cut_after is not None and not cut_done.is_set():
            cut_done.set()
            limit = min(limit, args.cut_after)
        stall = blob and args.stall_after is not None
        if stall:
            limit = min(limit, args.stall_after)
        self.wfile.write(body[:limit])
        self.wfile.flush()
        log(path, status, rng, limit)
        if stall:
            try:  # send nothing more until the client gives up (its low-speed limit)
                self.rfile.read(1)
            except OSError:
                pass
        if limit < len(body):
            self.close_connection = True
            self.connection.shutdown(2)


def main():
    global args
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--cut-after", type=int)
    parser.add_argument("--stall-after", type=int)
    parser.add_argument("--corrupt", action="store_true")
    parser.add_argument("--status", type=int)
    args = parser.parse_args()
    # The test runner's threads block signals and a spawned child inherits that mask: unblock
    # SIGTERM/SIGINT so that the test can stop this server.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
