"""A real mcp 2.x (`MCPServer`) Streamable HTTP server for Junction's interop tests.

Run with tests/interop/.peers/py-mcp2/bin/python:

    server_modern.py PORT [--stateless|--stateful] [--json|--sse] [--path /mcp] [--stdio]

PORT 0 picks a free port. Once the socket listens, prints exactly one line
`READY <port>` to stdout (logs go to stderr). Binds 127.0.0.1 only.
With --stdio it serves MCP on stdin/stdout instead (PORT ignored).

Tools:
  py_add(a: int, b: int)        -> structured {"result": a+b}, text "a+b"
  py_echo(text: str)            -> text unchanged
  py_lookup(region, q)          -> "region:q"; `region` carries x-mcp-header "Region"
  py_confirm(item: str)         -> asks the client (elicitation: form {ok: bool});
                                   2026-07-28: via InputRequiredResult (MRTR),
                                   handshake era: a server->client elicitation/create.
                                   Result text "confirmed <item>" / "declined <item>".
  py_slow(steps: int)           -> reports `steps` progress notifications, then "done <steps>"
"""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated

import _serve
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel, Field

class Confirm(BaseModel):
    ok: bool = Field(description="Go ahead?")

srv = MCPServer(name="py-modern", version="2.3.0-interop", instructions="Junction interop peer (mcp 2.x)")

@srv.tool()
def py_add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

@srv.tool()
def py_echo(text: str) -> str:
    """Echo the text back unchanged."""
    return text

@srv.tool()
def py_lookup(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    q: str,
) -> str:
    """Look something up in a region (region is mirrored into the Mcp-Param-Region header)."""
    return f"{region}:{q}"

def ask_confirm(item: str) -> Elicit[Confirm]:
    return Elicit(f"Confirm {item}?", Confirm)

@srv.tool()
def py_confirm(
    item: str,
    answer: Annotated[ElicitationResult[Confirm], Resolve(ask_confirm)],
) -> str:
    """Ask the user to confirm the item (elicitation; MRTR on 2026-07-28)."""
    if isinstance(answer, AcceptedElicitation) and answer.data.ok:
        return f"confirmed {item}"
    return f"declined {item}"

@srv.tool()
async def py_slow(steps: int, ctx: Context) -> str:
    """Report `steps` progress notifications, then finish."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        await asyncio.sleep(0.01)
    return f"done {steps}"

def main() -> None:
    args = _serve.parse(__doc__, stateless=True, json_response=True)
    if args.stdio:
        srv.run("stdio")
        return
    app = srv.streamable_http_app(
        streamable_http_path=args.path,
        json_response=args.json_response,
        stateless_http=args.stateless,
        host="127.0.0.1",
    )
    _serve.serve(app, args.port)

if __name__ == "__main__":
    sys.exit(main())
