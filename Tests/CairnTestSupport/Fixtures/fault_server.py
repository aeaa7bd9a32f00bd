#!/usr/bin/env python3
"""A static file server for the sync tests that produces real faults on the wire.

Serves ROOT like a dumb repository mirror (GET, HEAD, single `Range: bytes=N-` / `N-M`), and on
request misbehaves for blob paths (/blobs/...):
  --cut-after N    the first blob response sends N body bytes, then closes the connection (once)
  --stall-after N  every blob response sends N body bytes, then stops sending (keeps the socket)
  --corrupt        every blob body is served with its bytes inverted
  --status CODE    every request is answered with CODE and a short body (none for 204 and 304)
  --error-body N   with --status: the body is N bytes, sent in 64 KiB pieces until the client
                   stops reading (logged: the bytes the socket took, for a body over 64 KiB)
  --control FILE   a JSON object read at every request; while present its keys replace the
                   flags above (cut_after, stall_after, corrupt, status, applied to every blob
                   response, not once) and add: flip_bit (absolute bit offset in the blob to
                   invert), truncate (serve the blob as if it held only its first N bytes),
                   length_delta (announce a Content-Length off by N, then close), html (answer
                   blobs with a 200 HTML page), rate (body bytes per second, ten pieces a second),
                   error_body (as --error-body), shift_range (answer every blob GET with 206 and
                   the bytes from this offset, whatever the request asked), small_rate (as rate,
                   for every file that is not a blob: manifests, roots), hold_after (send a
                   blob's first N bytes, then nothing until the control file no longer holds
                   hold_after; then the rest), missing_page (answer a path that holds no
                   file with a 200 HTML page, as a single-page site's fallback does), gzip
                   (answer every blob GET with 200 and the whole blob gzip-compressed, with
                   Content-Encoding: gzip, as a compressing proxy would), cached_corrupt (as
                   corrupt, but not for a request with Cache-Control: no-cache: a cache holding
                   a damaged copy, which revalidates when asked to), cached_files (an object
                   of URL paths to files: each path is answered with that file's bytes, but
                   not for a request with Cache-Control: no-cache: a cache that is behind, with
                   an older manifest, which revalidates when asked to), cached_missing
                   (answer every blob GET 404, but not a request with Cache-Control: no-cache:
                   a cache that kept a 404 from before the blob was published)
  --port N         listen on N instead of a port chosen by the OS (to come back after a kill)
Each request is logged to --log as one line: "<path> <status> <range or -> <body bytes>", before
the last byte of its answer goes (a client that has the whole answer finds the line): the body
bytes the answer sends, or -1 for a slowed or held body the client stopped reading, or the bytes
the socket took of an error body over 64 KiB (logged once the client stopped reading).
The bound port (on 127.0.0.1, chosen by the OS) is written to --port-file once listening.
"""
import argparse
import gzip
import http.server
import os
import signal
import threading

import json
import time

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
        fault = faults()
        if fault.get("status"):
            status = fault["status"]
            size = 0 if status in (204, 304) else fault.get("error_body") or len(b"fault server error\n")
            # A body the socket takes at once is logged before it goes (the client may act on
            # it before this thread runs again); a larger one once the client stopped reading.
            small = size <= 65536
            if small:
                log(path, status, rng, size)
            self.send_response(status)
            if status not in (204, 304):
                self.send_header("Content-Length", str(size))
            self.end_headers()
            sent = 0
            try:
                piece = b"fault server error\n" * 3450  # 65,550 bytes
                while sent < size:
                    chunk = piece[:min(len(piece), size - sent)]
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    sent += len(chunk)
            except OSError:
                self.close_connection = True
            if not small:
                log(path, status, rng, sent)
            return
        full = os.path.realpath(os.path.join(args.root, path.lstrip("/")))
        if fault.get("missing_page") and not os.path.isfile(full):
            self.send_page(b"<!DOCTYPE html><html><body><div id=app></div><script src=/app.js></script></body></html>\n",
                           path, rng, head)
            return
        missing = path.startswith("/blobs/") and fault.get("cached_missing") and "no-cache" not in (self.headers.get("Cache-Control") or "")
        if missing or not full.startswith(os.path.realpath(args.root)) or not os.path.isfile(full):
            log(path, 404, rng, 0)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        revalidated = "no-cache" in (self.headers.get("Cache-Control") or "")
        older = (fault.get("cached_files") or {}).get(path)
        with open(older if older and not revalidated else full, "rb") as f:
            data = f.read()
        blob = path.startswith("/blobs/")
        if blob and fault.get("html"):
            self.send_page(b"<!DOCTYPE html><html><body><h1>Welcome to the captive portal</h1></body></html>\n", path, rng, head)
            return
        if blob and fault.get("gzip") and not head:
            packed = gzip.compress(data)
            log(path, 200, rng, len(packed))
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(packed)))
            self.end_headers()
            self.wfile.write(packed)
            return
        if blob and fault.get("truncate") is not None:
            data = data[:fault["truncate"]]
        start, end, status = 0, len(data) - 1, 200
        if blob and fault.get("shift_range") is not None and not head:
            start, status = fault["shift_range"], 206
        elif rng and rng.startswith("bytes="):
            first, _, last = rng[6:].partition("-")
            start = int(first)
            end = int(last) if last else len(data) - 1
            if start >= len(data):
                log(path, 416, rng, 0)
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        body = data[start:end + 1]
        if blob and (fault.get("corrupt") or (fault.get("cached_corrupt") and not revalidated)):
            body = bytes(b ^ 0xFF for b in body)
        flip = fault.get("flip_bit") if blob else None
        if flip is not None and start <= flip // 8 <= end:
            body = bytearray(body)
            body[flip // 8 - start] ^= 1 << (flip % 8)
            body = bytes(body)
        delta = fault.get("length_delta", 0) if blob else 0
        limit, stall, rate, hold = len(body), False, None, None
        if not head:
            if blob and delta < 0:
                limit = max(0, len(body) + delta)
            if blob and fault.get("cut_after") is not None and (control_active() or not cut_done.is_set()):
                cut_done.set()
                limit = min(limit, fault["cut_after"])
            stall = blob and fault.get("stall_after") is not None
            if stall:
                limit = min(limit, fault["stall_after"])
            rate = fault.get("rate") if blob else fault.get("small_rate")
            # A hold sends its first bytes, then waits for the test to lift it (a control file
            # without hold_after) before the rest: the test acts while the client is mid-blob,
            # however slowly either side is scheduled.
            hold = fault.get("hold_after") if blob else None
        self.send_response(status)
        self.send_header("Content-Length", str(max(0, len(body) + delta)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Accept-Ranges", "bytes")
        # With no body to send, the line goes before the headers (below: before the last byte).
        if head or limit == 0:
            log(path, status, rng, 0)
        self.end_headers()
        if head:
            return
        held = min(limit, hold) if hold is not None else limit
        # The line is logged before the last byte goes: a client that has the whole body (and
        # acted on it) finds its request in the log.
        last = max(0, limit - 1)
        logged = limit == 0
        try:
            self.send_body(body, 0, min(held, last), rate)
            if held < limit:
                while faults().get("hold_after") is not None:
                    time.sleep(0.02)
                self.send_body(body, min(held, last), last, rate)
            if not logged:
                log(path, status, rng, limit)
                logged = True
            self.send_body(body, last, limit, None)
        except OSError:
            if logged:
                return
            if not rate and hold is None:
                raise
            log(path, status, rng, -1)
            return
        if stall:
            try:  # send nothing more until the client gives up (its low-speed limit)
                self.rfile.read(1)
            except OSError:
                pass
        if limit < len(body) or delta > 0:
            self.close_connection = True
            self.connection.shutdown(2)

    def send_page(self, page, path, rng, head):
        """A 200 HTML page in place of what was asked for."""
        log(path, 200, rng, len(page))
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        if not head:
            self.wfile.write(page)

    def send_body(self, body, start, end, rate):
        """body[start:end], at `rate` bytes a second (ten pieces a second) when given."""
        if not rate:
            self.wfile.write(body[start:end])
            self.wfile.flush()
            return
        size = max(1, min(4096, rate // 10))
        for piece in range(start, end, size):
            self.wfile.write(body[piece:min(end, piece + size)])
            self.wfile.flush()
            time.sleep(min(size, end - piece) / rate)


def control_active():
    return args.control is not None and os.path.exists(args.control)


def faults():
    """The faults in force for this request: the control file's, else the flags'."""
    if control_active():
        try:
            with open(args.control) as f:
                return json.load(f)
        except (OSError, ValueError):
            pass
    return {"cut_after": args.cut_after, "stall_after": args.stall_after, "corrupt": args.corrupt,
            "status": args.status, "error_body": args.error_body}


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
    parser.add_argument("--error-body", type=int)
    parser.add_argument("--control")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    # The test runner's threads block signals and a spawned child inherits that mask: unblock
    # SIGTERM/SIGINT so that the test can stop this server.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
