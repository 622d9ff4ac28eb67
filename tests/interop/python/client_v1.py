"""A real mcp 1.x client (ClientSession over streamablehttp_client, handshake era
only) for Junction's interop tests. Run with tests/interop/.peers/py-mcp1/bin/python:

    client_v1.py --url URL [--call NAME --args JSON]... [--timeout SECONDS]

Prints ONE JSON document to stdout, the same shape as client.py's:

    {"mode": "mcp1", "protocolVersion": ..., "serverInfo": {...},
     "tools": ["name", ...],
     "calls": [{"name", "arguments", "result": {"content", "structuredContent", "isError"},
                "progress": [[progress, total, message], ...]}, ...]}

Any failure (connect, handshake, a call's JSON-RPC error) exits 1 with the error on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import traceback
from datetime import timedelta
from typing import Any

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

MAX_PAGES = 100


def dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": "mcp1"}
    async with streamablehttp_client(args.url, timeout=args.timeout) as (read, write, _sid):
        async with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=args.timeout)) as session:
            init = await session.initialize()
            out["protocolVersion"] = init.protocolVersion
            out["serverInfo"] = dump(init.serverInfo)
            names: list[str] = []
            cursor: str | None = None
            for _ in range(MAX_PAGES):
                page = await session.list_tools(cursor=cursor)
                names.extend(t.name for t in page.tools)
                cursor = page.nextCursor
                if not cursor:
                    break
            else:
                raise RuntimeError(f"tools/list did not end within {MAX_PAGES} pages")
            out["tools"] = names
            calls = []
            for i, name in enumerate(args.call):
                arguments = json.loads(args.args[i]) if i < len(args.args) else {}
                progress: list[list[Any]] = []

                async def on_progress(p: float, total: float | None, message: str | None, sink=progress) -> None:
                    sink.append([p, total, message])

                res = await session.call_tool(name, arguments, progress_callback=on_progress)
                calls.append({
                    "name": name,
                    "arguments": arguments,
                    "result": {
                        "content": [dump(c) for c in res.content],
                        "structuredContent": res.structuredContent,
                        "isError": bool(res.isError),
                    },
                    "progress": progress,
                })
            out["calls"] = calls
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--call", action="append", default=[], metavar="NAME")
    p.add_argument("--args", action="append", default=[], metavar="JSON")
    p.add_argument("--timeout", type=float, default=30.0)
    args = p.parse_args()
    try:
        out = asyncio.run(run(args))
    except BaseException as exc:  # report everything, including ExceptionGroups from anyio
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        print(f"client_v1.py: {type(exc).__name__}: {exc}", file=sys.stderr)
        for sub in getattr(exc, "exceptions", ()):
            print(f"  caused by {type(sub).__name__}: {sub}", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        return 1
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
