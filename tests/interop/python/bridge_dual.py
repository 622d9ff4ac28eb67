"""A real mcp 2.x (`MCPServer`) server, stateful with SSE responses, serving both
eras on one endpoint (the shape of ../conformance/fixture.py), whose tool asks
its client mid-call: the dual-era peer of Junction's bridging tests
(tests/bridge/dual.rs).

Run with tests/interop/.peers/py-mcp2/bin/python:

    bridge_dual.py PORT [--stateful|--stateless] [--sse|--json] [--path /mcp]

`ctx.elicit` only has a back-channel on a handshake-era session (a 2026-07-28
request gets "no back-channel for server-initiated requests"), so Junction
must call it on a handshake-era session for a handshake-era client.

Tools:
  dual_confirm(item: str) -> asks "Confirm <item>?" (form {ok: bool});
                             "confirmed <item>" / "declined <item>" / "cancelled <item>"
Once the socket listens it prints exactly one line `READY <port>`; binds 127.0.0.1 only.
"""

from __future__ import annotations

import sys

import _serve
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

srv = MCPServer(name="py-bridge-dual", version="1.0.0")


class Confirm(BaseModel):
    ok: bool


@srv.tool(description="Ask the user to confirm the item (a server->client elicitation)")
async def dual_confirm(item: str, ctx: Context) -> str:
    answer = await ctx.elicit(f"Confirm {item}?", Confirm)
    if answer.action == "accept":
        return f"confirmed {item}" if answer.data.ok else f"declined {item}"
    return f"declined {item}" if answer.action == "decline" else f"cancelled {item}"


def main() -> None:
    args = _serve.parse(__doc__, stateless=False, json_response=False)
    app = srv.streamable_http_app(
        streamable_http_path=args.path,
        json_response=args.json_response,
        stateless_http=args.stateless,
        host="127.0.0.1",
    )
    _serve.serve(app, args.port)


if __name__ == "__main__":
    sys.exit(main())
