"""Shared command line and serving for the interop peer servers (server_modern.py,
server_legacy.py, ../conformance/fixture.py), so every one of them behaves the same:

    SCRIPT PORT [--stateless|--stateful] [--json|--sse] [--path /mcp] [--stdio]

PORT 0 picks a free port. The socket is bound to 127.0.0.1 BEFORE exactly one
stdout line `READY <port>` is printed (logs go to stderr), so a test can spawn
the script, read one line and connect without polling. `--stdio` serves MCP on
stdin/stdout instead (PORT is then ignored and nothing else is printed).
"""

from __future__ import annotations

import argparse
import socket
from typing import Any

import uvicorn


def parse(doc: str | None, *, stateless: bool, json_response: bool) -> argparse.Namespace:
    """The common flags; the defaults differ per server (FastMCP's own are stateful + SSE)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("port", type=int)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--stateless", dest="stateless", action="store_true", default=stateless)
    g.add_argument("--stateful", dest="stateless", action="store_false")
    r = p.add_mutually_exclusive_group()
    r.add_argument("--json", dest="json_response", action="store_true", default=json_response)
    r.add_argument("--sse", dest="json_response", action="store_false")
    p.add_argument("--path", default="/mcp")
    p.add_argument("--stdio", action="store_true", help="serve on stdin/stdout instead of HTTP")
    return p.parse_args()


def serve(app: Any, port: int) -> None:
    """Binds 127.0.0.1:port, prints `READY <port>`, then runs the ASGI app until SIGTERM."""
    # Bind first so port 0 works and the ready line is true when printed; uvicorn
    # accepts from this socket, queued connections wait for its startup.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    print(f"READY {bound}", flush=True)
    server.run(sockets=[sock])
