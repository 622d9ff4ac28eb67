"""A real mcp 2.x client for Junction's interop tests.

Run with tests/interop/.peers/py-mcp2/bin/python:

    client.py --url URL [--mode auto|legacy|2026-07-28]
              [--call NAME --args JSON]...          (repeatable; --args defaults to {})
              [--accept-elicitation | --decline-elicitation] [--elicitation-content JSON]
              [--header 'Name: value']...           (extra HTTP headers, e.g. Authorization)
              [--allow-errors] [--timeout SECONDS]

Prints ONE JSON document to stdout:

    {"mode": "auto", "protocolVersion": "2026-07-28", "serverInfo": {...} | null,
     "tools": ["name", ...],                         # every page, in server order
     "calls": [{"name": ..., "arguments": {...},
                "result": {"content": [...], "structuredContent": ... | null, "isError": bool},
                "progress": [[progress, total, message], ...],
                "elicitations": [{"message": ..., "requestedSchema": ...}, ...]}, ...]}

A call the server answers with a JSON-RPC error makes the client exit 1 with the
error on stderr, unless --allow-errors: then that call carries
"error": {"code", "message", "data"} instead of "result". Any other failure
(connect, handshake, protocol) exits 1 with the error on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import traceback
from typing import Any

import httpx2
import mcp
import mcp.types as types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

MAX_PAGES = 100


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--mode", default="auto", help="auto | legacy | 2026-07-28")
    p.add_argument("--call", action="append", default=[], metavar="NAME")
    p.add_argument("--args", action="append", default=[], metavar="JSON")
    e = p.add_mutually_exclusive_group()
    e.add_argument("--accept-elicitation", action="store_true")
    e.add_argument("--decline-elicitation", action="store_true")
    p.add_argument("--elicitation-content", metavar="JSON", help="content to accept with (default: filled from the schema)")
    p.add_argument("--header", action="append", default=[], metavar="'Name: value'")
    p.add_argument("--allow-errors", action="store_true")
    p.add_argument("--timeout", type=float, default=30.0)
    args = p.parse_args(argv)
    if len(args.args) > len(args.call):
        p.error("more --args than --call")
    return args


def default_content(schema: dict[str, Any]) -> dict[str, Any]:
    """A plausible 'yes' answer for a flat elicitation schema."""
    out: dict[str, Any] = {}
    for key, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type")
        if "enum" in prop and prop["enum"]:
            out[key] = prop["enum"][0]
        elif kind == "boolean":
            out[key] = True
        elif kind in ("integer", "number"):
            out[key] = prop.get("minimum", 1)
        elif kind == "array":
            items = (prop.get("items") or {}).get("enum") or []
            out[key] = items[:1]
        else:
            out[key] = "yes"
    return out


def dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    current: dict[str, Any] = {}  # the call in flight, for the callbacks to record into

    async def on_elicit(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        schema = getattr(params, "requested_schema", None)
        schema_json = schema if isinstance(schema, dict) else (dump(schema) if schema is not None else None)
        current.setdefault("elicitations", []).append({"message": params.message, "requestedSchema": schema_json})
        if args.decline_elicitation:
            return types.ElicitResult(action="decline")
        if args.elicitation_content is not None:
            content = json.loads(args.elicitation_content)
        else:
            content = default_content(schema_json or {})
        return types.ElicitResult(action="accept", content=content)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        current.setdefault("progress", []).append([progress, total, message])

    headers: dict[str, str] = {}
    for h in args.header:
        name, sep, value = h.partition(":")
        if not sep:
            raise SystemExit(f"--header needs 'Name: value', got {h!r}")
        headers[name.strip()] = value.strip()

    timeout = httpx2.Timeout(args.timeout, read=args.timeout)
    http = create_mcp_http_client(headers=headers or None, timeout=timeout)
    answers_elicitation = args.accept_elicitation or args.decline_elicitation
    out: dict[str, Any] = {"mode": args.mode}
    async with http:
        client = mcp.Client(
            streamable_http_client(args.url, http_client=http),
            mode=args.mode,
            # Every list must reach the wire: the test is about what the server (or gateway) says.
            cache=None,
            read_timeout_seconds=args.timeout,
            elicitation_callback=on_elicit if answers_elicitation else None,
        )
        async with client:
            out["protocolVersion"] = client.protocol_version
            info = client.server_info
            out["serverInfo"] = dump(info) if info is not None else None

            names: list[str] = []
            cursor: str | None = None
            for _ in range(MAX_PAGES):
                page = await client.list_tools(cursor=cursor)
                names.extend(t.name for t in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            else:
                raise RuntimeError(f"tools/list did not end within {MAX_PAGES} pages")
            out["tools"] = names

            calls = []
            for i, name in enumerate(args.call):
                arguments = json.loads(args.args[i]) if i < len(args.args) else {}
                current.clear()
                record: dict[str, Any] = {"name": name, "arguments": arguments}
                try:
                    res = await client.call_tool(name, arguments, progress_callback=on_progress)
                except MCPError as err:
                    if not args.allow_errors:
                        raise
                    record["error"] = {"code": err.error.code, "message": err.error.message, "data": err.error.data}
                else:
                    record["result"] = {
                        "content": [dump(c) for c in res.content],
                        "structuredContent": res.structured_content,
                        "isError": bool(res.is_error),
                    }
                record["progress"] = current.get("progress", [])
                record["elicitations"] = current.get("elicitations", [])
                calls.append(record)
            out["calls"] = calls
    return out


def main() -> int:
    args = parse_args(sys.argv[1:])
    try:
        out = asyncio.run(run(args))
    except BaseException as exc:  # report everything, including ExceptionGroups from anyio
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        print(f"client.py: {type(exc).__name__}: {exc}", file=sys.stderr)
        for sub in getattr(exc, "exceptions", ()):
            print(f"  caused by {type(sub).__name__}: {sub}", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        return 1
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
