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

Prompts:
  legacy_hello(name: str) -> one user message "Say hello to <name>."
"""

from __future__ import annotations

import asyncio
import sys

import _serve
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


@mcp.prompt()
def legacy_hello(name: str) -> str:
    """Ask for a greeting."""
    return f"Say hello to {name}."


def main() -> None:
    args = _serve.parse(__doc__, stateless=False, json_response=False)
    if args.stdio:
        mcp.run("stdio")
        return
    mcp.settings.stateless_http = args.stateless
    mcp.settings.json_response = args.json_response
    mcp.settings.streamable_http_path = args.path
    _serve.serve(mcp.streamable_http_app(), args.port)


if __name__ == "__main__":
    sys.exit(main())
