"""A real mcp 1.x (`FastMCP`) server whose tool asks its client mid-call:
the peer for Junction's era-bridging tests (tests/bridge.rs).

Run with tests/interop/.peers/py-mcp1/bin/python:

    bridge_peers.py PORT [--stateful|--stateless] [--sse|--json] [--path /mcp] [--stdio]

Handshake era only, so `ctx.elicit` is a real server->client
`elicitation/create` request on the call's SSE stream (or on stdout with
--stdio). Through Junction a 2026-07-28 client sees it as an
InputRequiredResult and answers by retrying; the client half of the test is
the 2.x client of client.py (venv py-mcp2) with --accept-elicitation.

Tools:
  bridge_confirm(item: str) -> asks "Confirm <item>?" (form {ok: bool});
                               "confirmed <item>" / "declined <item>" /
                               "cancelled <item>" / "refused <item>: <error>"
Once the socket listens it prints exactly one line `READY <port>`; binds 127.0.0.1 only.
"""

from __future__ import annotations

import sys

import _serve
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.exceptions import McpError
from pydantic import BaseModel

mcp = FastMCP(name="py-bridge", instructions="Junction bridge peer (mcp 1.x)", host="127.0.0.1")


class Confirm(BaseModel):
    ok: bool


@mcp.tool()
async def bridge_confirm(item: str, ctx: Context) -> str:
    """Ask the user to confirm the item (a server->client elicitation)."""
    try:
        answer = await ctx.elicit(message=f"Confirm {item}?", schema=Confirm)
    except McpError as err:
        return f"refused {item}: {err.error.code}"
    if answer.action == "accept":
        return f"confirmed {item}" if answer.data.ok else f"declined {item}"
    return f"{answer.action}d {item}" if answer.action == "decline" else f"cancelled {item}"


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
