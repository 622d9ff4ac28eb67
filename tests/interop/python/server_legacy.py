"""A real mcp 1.x (`FastMCP`) Streamable HTTP server: handshake era only.

This is what most MCP servers in the wild look like. Run with
tests/interop/.peers/py-mcp1/bin/python:

    server_legacy.py PORT [--stateful|--stateless] [--sse|--json] [--path /mcp]

Defaults are FastMCP's own: stateful (Mcp-Session-Id) and SSE responses.
PORT 0 picks a free port. Once the socket listens, prints exactly one line
`READY <port>` to stdout (logs go to stderr). Binds 127.0.0.1 only.

Tools:
  legacy_greet(name: str) -> "Hello, <name>!"
  legacy_count(n: int)    -> reports n progress notifications (1..n of n), then "counted <n>"
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys

import uvicorn
from mcp.server.fastmcp import Context, FastMCP

mcp = FastMCP(name="py-legacy", instructions="Junction interop peer (mcp 1.x)", host="127.0.0.1")


@mcp.tool()
def legacy_greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


@mcp.tool()
async def legacy_count(n: int, ctx: Context) -> str:
    """Count to n, reporting progress at every step."""
    for i in range(n):
        await ctx.report_progress(i + 1, n, f"count {i + 1}")
        await asyncio.sleep(0.01)
    return f"counted {n}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("port", type=int)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--stateful", dest="stateless", action="store_false", default=False)
    g.add_argument("--stateless", dest="stateless", action="store_true")
    r = p.add_mutually_exclusive_group()
    r.add_argument("--sse", dest="json_response", action="store_false", default=False)
    r.add_argument("--json", dest="json_response", action="store_true")
    p.add_argument("--path", default="/mcp")
    args = p.parse_args()

    mcp.settings.stateless_http = args.stateless
    mcp.settings.json_response = args.json_response
    mcp.settings.streamable_http_path = args.path
    app = mcp.streamable_http_app()

    # Bind first so port 0 works and the ready line is true when printed.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(128)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    print(f"READY {port}", flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
