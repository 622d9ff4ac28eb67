"""Serving for the tests/oauth servers: bind 127.0.0.1 (never anything else) first,
so port 0 works and the READY line is true when printed, then run the ASGI app."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import uvicorn


def bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


def serve(port: int, make_app: Callable[[int], tuple[Any, str]], *, lifespan: str = "off") -> None:
    """`make_app(bound_port)` returns (ASGI app, URL for the READY line). Prints
    `READY <url>` once listening (queued connections wait for uvicorn), then serves
    until SIGTERM/SIGINT."""
    sock = bind(port)
    app, url = make_app(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan=lifespan))
    print(f"READY {url}", flush=True)
    server.run(sockets=[sock])
