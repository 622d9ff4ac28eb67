"""A real handshake-era client (mcp 1.x ClientSession) receiving change
notifications through Junction on its session's GET stream (tests/listen.rs).

Run with tests/interop/.peers/py-mcp1/bin/python:

    listen_client_v1.py --url URL [--timeout SECONDS] [--changes N]

Initializes (the SDK opens the GET stream itself once it has a session id),
lists tools and prints `READY`. Then, N times: waits for
`notifications/tools/list_changed`, lists tools again and prints one JSON line

    {"event": "ToolListChangedNotification", "before": [...], "after": [...]}

Any failure (connect, no notification within the timeout) exits 1 with the
error on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import traceback

import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


async def names(session: ClientSession) -> list[str]:
    out: list[str] = []
    cursor: str | None = None
    for _ in range(100):
        page = await session.list_tools(cursor=cursor)
        out.extend(t.name for t in page.tools)
        cursor = page.nextCursor
        if not cursor:
            return out
    raise RuntimeError("tools/list did not end within 100 pages")


async def run(url: str, timeout: float, changes: int) -> None:
    events: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            await events.put(type(message.root).__name__)

    async with streamablehttp_client(url, timeout=timeout) as (read, write, _):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            before = await names(session)
            print("READY", flush=True)
            for _ in range(changes):
                event = await asyncio.wait_for(events.get(), timeout)
                after = await names(session)
                print(json.dumps({"event": event, "before": before, "after": after}), flush=True)
                before = after


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--changes", type=int, default=1)
    args = p.parse_args()
    try:
        asyncio.run(run(args.url, args.timeout, args.changes))
    except BaseException:  # report every failure, including timeouts and cancellations
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
