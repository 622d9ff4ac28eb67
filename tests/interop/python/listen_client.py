"""A real mcp 2.x client listening for changes through Junction (tests/listen.rs).

Run with tests/interop/.peers/py-mcp2/bin/python:

    listen_client.py --url URL [--timeout SECONDS]

Connects in 2026-07-28 mode, lists tools, opens `subscriptions/listen` with
toolsListChanged and prints one line `READY <honored filter JSON>` once the
stream is acknowledged. It then waits for the first change event, lists tools
again and prints ONE JSON document:

    {"honored": {...}, "subscriptionId": ..., "event": "ToolsListChanged",
     "before": ["name", ...], "after": ["name", ...]}

Any failure (connect, no event within the timeout) exits 1 with the error on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import traceback

import httpx2
import mcp
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def names(client: mcp.Client) -> list[str]:
    out: list[str] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        out.extend(t.name for t in page.tools)
        cursor = page.next_cursor
        if not cursor:
            return out
    raise RuntimeError("tools/list did not end within 100 pages")


async def run(url: str, timeout: float) -> dict:
    http = create_mcp_http_client(timeout=httpx2.Timeout(timeout, read=None))
    async with http:
        client = mcp.Client(
            streamable_http_client(url, http_client=http),
            mode="2026-07-28",
            cache=None,
            read_timeout_seconds=timeout,
        )
        async with client:
            before = await names(client)
            async with client.listen(tools_list_changed=True) as sub:
                honored = sub.honored.model_dump(by_alias=True, exclude_none=True, mode="json")
                print("READY " + json.dumps(honored), flush=True)
                event = await asyncio.wait_for(sub.__anext__(), timeout)
                after = await names(client)
                return {
                    "honored": honored,
                    "subscriptionId": sub.subscription_id,
                    "event": type(event).__name__,
                    "before": before,
                    "after": after,
                }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--timeout", type=float, default=30.0)
    args = p.parse_args()
    try:
        report = asyncio.run(run(args.url, args.timeout))
    except BaseException:  # report every failure, including timeouts and cancellations
        traceback.print_exc()
        return 1
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
