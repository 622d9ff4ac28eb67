"""A logging HTTP reverse proxy: see exactly what two MCP peers say to each other.

    wire_log.py LISTEN_PORT UPSTREAM_URL_BASE [--log FILE]

e.g. `wire_log.py 0 http://127.0.0.1:8101` then point a client at
http://127.0.0.1:<port>/mcp. Prints `READY <port>` once listening. Every request
(method, path, headers, body) and response (status, headers, body chunks as they
stream) is appended to the log (stderr by default). Responses stream through
unbuffered, so SSE and long-lived GET streams behave as without the proxy.
Stdlib only; runs under any python3. Binds 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import http.client
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}
_lock = threading.Lock()
_log = sys.stderr
_seq = 0


def emit(text: str) -> None:
    with _lock:
        _log.write(text)
        _log.flush()


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream: urllib.parse.SplitResult

    def log_message(self, *_args: object) -> None:  # silence the default access log
        pass

    def _handle(self) -> None:
        global _seq
        with _lock:
            _seq += 1
            n = _seq
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        lines = [f"\n>>> #{n} {self.command} {self.path}"]
        lines += [f">>> {k}: {v}" for k, v in self.headers.items()]
        if body:
            lines.append(">>> " + body.decode("utf-8", "replace"))
        emit("\n".join(lines) + "\n")

        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=300)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        headers["Host"] = f"{self.upstream.hostname}:{self.upstream.port}"
        try:
            conn.request(self.command, self.path, body=body or None, headers=headers)
            resp = conn.getresponse()
        except OSError as exc:
            emit(f"<<< #{n} upstream failed: {exc}\n")
            self.send_error(502)
            return
        lines = [f"<<< #{n} {resp.status} {resp.reason}"]
        lines += [f"<<< {k}: {v}" for k, v in resp.getheaders()]
        emit("\n".join(lines) + "\n")

        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP and k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                emit(f"<<< #{n} body: " + chunk.decode("utf-8", "replace") + "\n")
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            emit(f"<<< #{n} client went away\n")
        finally:
            conn.close()

    do_GET = do_POST = do_DELETE = do_PUT = _handle


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        # A peer closing a keep-alive connection is normal, not worth a traceback.
        exc = sys.exc_info()[1]
        if not isinstance(exc, (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


def main() -> None:
    global _log
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("port", type=int)
    p.add_argument("upstream")
    p.add_argument("--log")
    args = p.parse_args()
    if args.log:
        _log = open(args.log, "a", encoding="utf-8")
    Proxy.upstream = urllib.parse.urlsplit(args.upstream)
    srv = Server(("127.0.0.1", args.port), Proxy)
    print(f"READY {srv.server_address[1]}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
