"""Opens idle connections, sessions or change streams on one Junction and
samples its VmRSS at each level (run.sh, STREAMS=1).

Usage: streams.py --url http://127.0.0.1:PORT/mcp --pid PID --kind KIND --levels 0,1000,5000,10000
KIND: conn    idle keep-alive HTTP/1.1 connections after one GET /healthz (the baseline)
      session handshake-era sessions minted by `initialize` (8 connections; nothing held open)
      get     a session each, then its GET stream, held open
      listen  modern `subscriptions/listen` streams, held open after their acknowledgement
Prints one TSV row per level to stdout: kind, n, rss_kib, open_streams (Junction's
`junction_open_streams` gauge for the kind, `-` where none applies). Raw asyncio
sockets: cheap enough for 10,000 streams in one process; loopback only.
"""

import argparse
import asyncio
import json
import resource
import sys
import time
from urllib.parse import urlsplit

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}}
OPENING = 64  # handshakes in flight at once


class Target:
    def __init__(self, url):
        u = urlsplit(url)
        if u.hostname not in ("127.0.0.1", "localhost"):
            raise SystemExit("loopback only")
        self.host, self.port, self.path = u.hostname, u.port, u.path or "/"

    async def connect(self):
        return await asyncio.open_connection(self.host, self.port)

    def post(self, body, headers):
        data = json.dumps(body).encode()
        head = [f"POST {self.path} HTTP/1.1", f"Host: {self.host}:{self.port}",
                "Content-Type: application/json", "Accept: application/json, text/event-stream",
                f"Content-Length: {len(data)}", *headers, "", ""]
        return "\r\n".join(head).encode() + data


async def read_head(reader):
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    lines = head.split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return status, headers


async def read_body(reader, headers):
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    if headers.get("transfer-encoding", "").lower() == "chunked":
        out = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            out += await reader.readexactly(size + 2)
            if size == 0:
                return out
    return b""


async def initialize(target, reader, writer):
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {},
                       "clientInfo": {"name": "junction-bench", "version": "0"}}}
    writer.write(target.post(body, []))
    status, headers = await read_head(reader)
    await read_body(reader, headers)
    sid = headers.get("mcp-session-id")
    if status != 200 or not sid:
        raise RuntimeError(f"initialize: HTTP {status}, session id {sid!r}")
    return sid


async def open_one(target, kind):
    """One connection (or session) of `kind`; returns what must stay referenced."""
    reader, writer = await target.connect()
    if kind == "conn":
        writer.write(f"GET /healthz HTTP/1.1\r\nHost: {target.host}\r\n\r\n".encode())
        status, headers = await read_head(reader)
        await read_body(reader, headers)
    elif kind == "listen":
        body = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
                "params": {"notifications": {"toolsListChanged": True}, "_meta": META}}
        writer.write(target.post(body, [f"MCP-Protocol-Version: {MODERN}",
                                        "Mcp-Method: subscriptions/listen"]))
        status, headers = await read_head(reader)
        if status == 200:
            await reader.readuntil(b"\n\n")  # the acknowledgement event
    elif kind == "get":
        sid = await initialize(target, reader, writer)
        writer.write("\r\n".join([
            f"GET {target.path} HTTP/1.1", f"Host: {target.host}:{target.port}",
            "Accept: text/event-stream", f"Mcp-Session-Id: {sid}",
            f"MCP-Protocol-Version: {LEGACY}", "", ""]).encode())
        status, headers = await read_head(reader)
    else:
        raise ValueError(kind)
    if status != 200:
        raise RuntimeError(f"{kind}: HTTP {status}")
    return reader, writer


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def open_streams_gauge(target, kind):
    name = {"listen": "listen", "get": "get"}.get(kind)
    if not name:
        return "-"
    reader, writer = await target.connect()
    writer.write(f"GET /metrics HTTP/1.1\r\nHost: {target.host}\r\nConnection: close\r\n\r\n".encode())
    _, headers = await read_head(reader)
    text = (await read_body(reader, headers)).decode()
    writer.close()
    for line in text.splitlines():
        if line.startswith("junction_open_streams") and f'kind="{name}"' in line:
            return str(int(float(line.split()[-1])))
    return "0"


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--kind", required=True, choices=["conn", "session", "get", "listen"])
    ap.add_argument("--levels", default="0,1000,5000,10000")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    target = Target(args.url)
    held = []
    sessions = 0
    gate = asyncio.Semaphore(OPENING)
    pool = [await target.connect() for _ in range(8)] if args.kind == "session" else []

    async def one():
        async with gate:
            held.append(await open_one(target, args.kind))

    async def mint(conn, count):
        nonlocal sessions
        for _ in range(count):
            await initialize(target, *conn)
            sessions += 1

    for n in (int(x) for x in args.levels.split(",")):
        t0 = time.monotonic()
        if args.kind == "session":
            todo = n - sessions
            await asyncio.gather(*(mint(c, todo // len(pool) + (i < todo % len(pool)))
                                   for i, c in enumerate(pool)))
        else:
            await asyncio.gather(*(one() for _ in range(n - len(held))))
        await asyncio.sleep(1.0)  # let the gateway settle (tasks parked, buffers returned)
        samples = []
        for _ in range(3):
            samples.append(rss_kib(args.pid))
            await asyncio.sleep(0.1)
        rss = min(samples)
        gauge = await open_streams_gauge(target, args.kind)
        print(f"{args.kind}\t{n}\t{rss}\t{gauge}", flush=True)
        print(f"[streams] {args.kind} n={n}: VmRSS {rss} KiB, gauge {gauge}, "
              f"opened in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    for _, w in held + pool:
        w.close()


if __name__ == "__main__":
    asyncio.run(main())
