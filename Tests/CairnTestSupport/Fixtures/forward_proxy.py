#!/usr/bin/env python3
"""A forward HTTP proxy for the sync tests, as a site's proxy stands between devices and the net.

Takes requests in absolute form (`GET http://host:port/path HTTP/1.1`), sends them on to that
host in origin form with `Connection: close`, and relays the answer; takes `CONNECT host:port`
(for https sources), answers 200 and relays bytes both ways until either side closes.
  --auth USER:PASSWORD  answer 407 (Proxy-Authenticate: Basic) to any request without these
                        credentials in Proxy-Authorization
  --tls-cert PEM --tls-key PEM
                        speak TLS to the client (an https:// proxy) with this certificate
Each request is logged to --log as one line: "<method> <target> <status>" (407 for refused,
502 when the host could not be reached, else 200 for CONNECT and the origin's status line's code
for the rest). The bound port (on 127.0.0.1, chosen by the OS) is written to --port-file once
listening.
"""
import argparse
import base64
import os
import select
import signal
import socket
import socketserver
import ssl
import threading
import urllib.parse

args = None
log_lock = threading.Lock()


def log(method, target, status):
    with log_lock, open(args.log, "a") as f:
        f.write(f"{method} {target} {status}\n")


def relay(a, b):
    """Copies bytes both ways until one side closes."""
    sockets = [a, b]
    while True:
        # A TLS socket may hold decrypted bytes that select() cannot see.
        readable = [s for s in sockets if isinstance(s, ssl.SSLSocket) and s.pending()]
        if not readable:
            readable, _, _ = select.select(sockets, [], [], 60)
        if not readable:
            return
        for s in readable:
            data = s.recv(65536)
            if not data:
                return
            (b if s is a else a).sendall(data)


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        while True:
            line = self.rfile.readline(65537)
            if not line:
                return
            request = line.decode("latin-1").rstrip("\r\n")
            if not request:
                continue
            headers = []
            while True:
                header = self.rfile.readline(65537)
                if header in (b"\r\n", b"\n", b""):
                    break
                headers.append(header.decode("latin-1").rstrip("\r\n"))
            method, target, version = request.split(" ", 2)
            fields = {h.split(":", 1)[0].strip().lower(): h.split(":", 1)[1].strip() for h in headers if ":" in h}
            if args.auth is not None:
                wanted = "Basic " + base64.b64encode(args.auth.encode()).decode()
                if fields.get("proxy-authorization") != wanted:
                    log(method, target, 407)
                    body = b"proxy authentication required\n"
                    self.wfile.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                                     b"Proxy-Authenticate: Basic realm=\"cairn test proxy\"\r\n"
                                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
                    self.wfile.flush()
                    continue
            if method == "CONNECT":
                host, port = target.rsplit(":", 1)
                try:
                    upstream = socket.create_connection((host, int(port)), timeout=10)
                except OSError:
                    log(method, target, 502)
                    self.wfile.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                    self.wfile.flush()
                    continue
                log(method, target, 200)
                self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                self.wfile.flush()
                with upstream:
                    upstream.settimeout(None)
                    relay(self.connection, upstream)
                return
            url = urllib.parse.urlsplit(target)
            if url.scheme != "http" or not url.hostname:
                log(method, target, 400)
                self.wfile.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            try:
                upstream = socket.create_connection((url.hostname, url.port or 80), timeout=10)
            except OSError:
                log(method, target, 502)
                self.wfile.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            with upstream:
                upstream.settimeout(None)
                skip = ("proxy-authorization", "proxy-connection", "connection", "keep-alive")
                kept = [h for h in headers if h.split(":", 1)[0].strip().lower() not in skip]
                path = (url.path or "/") + ("?" + url.query if url.query else "")
                upstream.sendall(("\r\n".join([f"{method} {path} {version}"] + kept + ["Connection: close", "", ""]))
                                 .encode("latin-1"))
                first = b""
                while True:
                    data = upstream.recv(65536)
                    if not data:
                        break
                    if not first:
                        first = data
                        parts = data.split(b"\r\n", 1)[0].split(b" ")
                        log(method, target, int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0)
                    self.connection.sendall(data)
            # The origin closed after its answer (Connection: close), so the client's
            # connection ends here too.
            return


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    tls = None

    def get_request(self):
        connection, address = super().get_request()
        if self.tls is not None:
            # The handshake happens at the first read, on the connection's own thread.
            connection = self.tls.wrap_socket(connection, server_side=True, do_handshake_on_connect=False)
        return connection, address


def main():
    global args
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--auth")
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    args = parser.parse_args()
    # Spawned by a test runner whose threads block signals: SIGTERM must still stop it.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    server = Server(("127.0.0.1", 0), Handler)
    if args.tls_cert:
        server.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.tls.load_cert_chain(args.tls_cert, args.tls_key)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
